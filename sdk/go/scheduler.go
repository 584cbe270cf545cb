package podfit

import (
	"context"
	"fmt"

	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// A pod, wherever a method takes one, is anything ToPodReference takes: Kubernetes JSON, a value
// that json.Marshals to a pod (a k8s.io/api corev1.Pod), a *podfitv1.Pod, or Cached(namespace, name)
// for a pod already in the cache.

// Filter returns every candidate node's filter verdict, with kube-scheduler's reasons. Options:
// NodeNames, SchedulerName, KubeSchedulerVersion, BasicView.
func (c *Client) Filter(ctx context.Context, pod any, opts ...CallOption) (*podfitv1.FilterResponse, error) {
	config, err := newCallConfig("Filter", opts, decisionOptions)
	if err != nil {
		return nil, err
	}
	reference, err := toPodReference(pod, "pod")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Scheduler.Filter, &podfitv1.FilterRequest{
		Pod: reference, NodeNames: config.nodeNames, SchedulerName: config.schedulerName, View: config.view,
		KubeSchedulerVersion: config.version,
	})
}

// Score returns the scores of every feasible node, best first, with the per-plugin breakdown.
// Options: NodeNames, SchedulerName, KubeSchedulerVersion, BasicView (only the best nodes).
func (c *Client) Score(ctx context.Context, pod any, opts ...CallOption) (*podfitv1.ScoreResponse, error) {
	config, err := newCallConfig("Score", opts, decisionOptions)
	if err != nil {
		return nil, err
	}
	reference, err := toPodReference(pod, "pod")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Scheduler.Score, &podfitv1.ScoreRequest{
		Pod: reference, NodeNames: config.nodeNames, SchedulerName: config.schedulerName, View: config.view,
		KubeSchedulerVersion: config.version,
	})
}

// Schedule filters, scores and selects a node, as kube-scheduler would; with Assume the pod is
// reserved there in the cache. An unschedulable pod is an answer (SelectedNode empty, the reasons
// per node, a preemption answer), not an error. Options: NodeNames, SchedulerName, KubeSchedulerVersion, BasicView,
// Assume, DisablePreemption.
func (c *Client) Schedule(ctx context.Context, pod any, opts ...CallOption) (*podfitv1.ScheduleResponse, error) {
	config, err := newCallConfig("Schedule", opts, decisionOptions|optAssume|optDisablePreemption)
	if err != nil {
		return nil, err
	}
	reference, err := toPodReference(pod, "pod")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Scheduler.Schedule, &podfitv1.ScheduleRequest{
		Pod:                  reference,
		NodeNames:            config.nodeNames,
		SchedulerName:        config.schedulerName,
		Assume:               config.assume,
		DisablePreemption:    config.disablePreemption,
		View:                 config.view,
		KubeSchedulerVersion: config.version,
	})
}

// ScheduleBatch schedules pods in order on one call, always assuming them: each sees the earlier
// ones. Slices among pods are spread. Options: NodeNames, SchedulerName, KubeSchedulerVersion, BasicView,
// DisablePreemption, AllOrNothing (undo everything unless every pod is placed), DryRun (undo everything).
func (c *Client) ScheduleBatch(ctx context.Context, pods []any, opts ...CallOption) (*podfitv1.ScheduleBatchResponse, error) {
	config, err := newCallConfig("ScheduleBatch", opts, decisionOptions|optDisablePreemption|optAllOrNothing|optDryRun)
	if err != nil {
		return nil, err
	}
	references, err := podReferences(pods, "pods")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Scheduler.ScheduleBatch, &podfitv1.ScheduleBatchRequest{
		Pods:                 references,
		NodeNames:            config.nodeNames,
		SchedulerName:        config.schedulerName,
		AllOrNothing:         config.allOrNothing,
		DryRun:               config.dryRun,
		DisablePreemption:    config.disablePreemption,
		View:                 config.view,
		KubeSchedulerVersion: config.version,
	})
}

// Preempt says which pods to evict for pod to fit, and where it would then go; podfit never evicts
// anything itself. Options: NodeNames, SchedulerName, KubeSchedulerVersion.
func (c *Client) Preempt(ctx context.Context, pod any, opts ...CallOption) (*podfitv1.PreemptResponse, error) {
	config, err := newCallConfig("Preempt", opts, optNodeNames|profileOptions)
	if err != nil {
		return nil, err
	}
	reference, err := toPodReference(pod, "pod")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Scheduler.Preempt, &podfitv1.PreemptRequest{
		Pod: reference, NodeNames: config.nodeNames, SchedulerName: config.schedulerName,
		KubeSchedulerVersion: config.version,
	})
}

func podReferences(pods []any, field string) ([]*podfitv1.PodReference, error) {
	items := flatten(pods)
	references := make([]*podfitv1.PodReference, 0, len(items))
	for i, pod := range items {
		reference, err := toPodReference(pod, fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		references = append(references, reference)
	}
	return references, nil
}
