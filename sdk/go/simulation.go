package podfit

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// Simulate applies a what-if scenario (nil changes nothing), then places pods in order inside it,
// each assumed so the next sees it. The server's cache never changes. Build the scenario's node
// templates and pods with ToClusterObject and ToPodReference. Options: SchedulerName, KubeSchedulerVersion.
func (c *Client) Simulate(ctx context.Context, scenario *podfitv1.Scenario, pods []any, opts ...CallOption) (*podfitv1.SimulateResponse, error) {
	config, err := newCallConfig("Simulate", opts, profileOptions)
	if err != nil {
		return nil, err
	}
	references, err := podReferences(pods, "pods")
	if err != nil {
		return nil, err
	}
	if scenario == nil {
		scenario = &podfitv1.Scenario{}
	}
	return call(ctx, c.Simulation.Simulate, &podfitv1.SimulateRequest{
		Scenario: scenario, Pods: references, SchedulerName: config.schedulerName,
		KubeSchedulerVersion: config.version,
	})
}

// NodeGroup is a node group as cluster-autoscaler sees it: at most MaxSize-CurrentSize new copies
// of Template (a Node, anything ToClusterObject takes; Kubernetes JSON may leave the kind out).
// ResourceSlices are what DRA drivers publish on one node of the group (node-local ResourceSlices,
// anything ToClusterObject takes): each new node gets its own copies, in pools of its own.
type NodeGroup struct {
	ID             string
	Template       any
	CurrentSize    int32
	MaxSize        int32
	ResourceSlices []any
}

// EstimateScaleUp is cluster-autoscaler's binpacking estimate: for each node group, how many new
// nodes the pending pods need. groups are cluster-autoscaler's equivalence groups (identical pending
// pods), in the order it would hand them over. Options: SchedulerName, KubeSchedulerVersion.
func (c *Client) EstimateScaleUp(ctx context.Context, groups [][]any, nodeGroups []NodeGroup, opts ...CallOption) (*podfitv1.EstimateScaleUpResponse, error) {
	config, err := newCallConfig("EstimateScaleUp", opts, profileOptions)
	if err != nil {
		return nil, err
	}
	request := &podfitv1.EstimateScaleUpRequest{SchedulerName: config.schedulerName, KubeSchedulerVersion: config.version}
	for g, pods := range groups {
		references, err := podReferences(pods, fmt.Sprintf("groups[%d].pods", g))
		if err != nil {
			return nil, err
		}
		request.Groups = append(request.Groups, &podfitv1.PodGroup{Pods: references})
	}
	for i, group := range nodeGroups {
		template, err := toClusterObject(group.Template, "Node", fmt.Sprintf("node_groups[%d].template", i))
		if err != nil {
			return nil, err
		}
		var slices []*podfitv1.ClusterObject
		for j, slice := range group.ResourceSlices {
			object, err := toClusterObject(slice, "ResourceSlice", fmt.Sprintf("node_groups[%d].template_resource_slices[%d]", i, j))
			if err != nil {
				return nil, err
			}
			slices = append(slices, object)
		}
		request.NodeGroups = append(request.NodeGroups, &podfitv1.NodeGroup{
			Id: group.ID, Template: template, CurrentSize: group.CurrentSize, MaxSize: group.MaxSize,
			TemplateResourceSlices: slices,
		})
	}
	return call(ctx, c.Simulation.EstimateScaleUp, request)
}

// SimulateDrain is cluster-autoscaler's scale-down simulation of nodeNames, in order: per node,
// whether it can go (its drain rules and PDB budgets) and where each pod would move. Options:
// SkipNodesWithSystemPods, SkipNodesWithLocalStorage, SkipNodesWithCustomControllerPods (all true by
// default, as cluster-autoscaler's flags), MinReplicaCount, ExpendablePodsPriorityCutoff, SkipTerminalPods,
// AllButRemovedDestinations, EvaluatedAt, SchedulerName, KubeSchedulerVersion.
func (c *Client) SimulateDrain(ctx context.Context, nodeNames []string, opts ...CallOption) (*podfitv1.SimulateDrainResponse, error) {
	config, err := newCallConfig("SimulateDrain", opts, optDrain|optEvaluatedAt|profileOptions)
	if err != nil {
		return nil, err
	}
	request := &podfitv1.SimulateDrainRequest{
		NodeNames: nodeNames,
		Options: &podfitv1.DrainOptions{
			SkipNodesWithSystemPods:           config.skipSystemPods,
			SkipNodesWithLocalStorage:         config.skipLocalStorage,
			SkipNodesWithCustomControllerPods: config.skipCustomPods,
			MinReplicaCount:                   config.minReplicaCount,
			ExpendablePodsPriorityCutoff:      config.expendableCutoff,
			SkipTerminalPods:                  config.skipTerminalPods,
		},
		Destinations:         config.destinations,
		SchedulerName:        config.schedulerName,
		KubeSchedulerVersion: config.version,
	}
	if !config.evaluatedAt.IsZero() {
		request.Now = timestamppb.New(config.evaluatedAt)
	}
	return call(ctx, c.Simulation.SimulateDrain, request)
}
