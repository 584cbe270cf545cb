package podfit

import (
	"strings"
	"time"

	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// CallOption tunes one call: the candidate nodes, the profile, assume, ... Each method documents the
// ones it takes and refuses the others (InvalidArgument), rather than ignore what the caller asked.
type CallOption func(*callConfig)

type callConfig struct {
	used              optionSet
	nodeNames         []string
	schedulerName     string
	version           string
	assume            bool
	disablePreemption bool
	view              podfitv1.View
	allOrNothing      bool
	dryRun            bool
	namespace         string
	labelSelector     string
	fieldSelector     string
	podFilter         podfitv1.PodPhaseFilter
	limit             int32
	continueToken     string
	skipSystemPods    *bool
	skipLocalStorage  *bool
	skipCustomPods    *bool
	minReplicaCount   int32
	expendableCutoff  *int32
	skipTerminalPods  *bool
	destinations      podfitv1.DrainDestinations
	evaluatedAt       time.Time
}

type optionSet uint

const (
	optNodeNames optionSet = 1 << iota
	optSchedulerName
	optAssume
	optDisablePreemption
	optView
	optAllOrNothing
	optNamespace
	optLabelSelector
	optPodFilter
	optDrain
	optEvaluatedAt
	optLimit
	optContinue
	optKubeSchedulerVersion
	optFieldSelector
	optDryRun
)

// The request field each option sets, to name a refused one.
var optionFields = []struct {
	option optionSet
	field  string
}{
	{optNodeNames, "node_names"},
	{optSchedulerName, "scheduler_name"},
	{optAssume, "assume"},
	{optDisablePreemption, "disable_preemption"},
	{optView, "view"},
	{optAllOrNothing, "all_or_nothing"},
	{optDryRun, "dry_run"},
	{optNamespace, "namespace"},
	{optLabelSelector, "label_selector"},
	{optPodFilter, "pod_filter"},
	{optDrain, "options"},
	{optEvaluatedAt, "now"},
	{optLimit, "limit"},
	{optContinue, "continue_token"},
	{optKubeSchedulerVersion, "kube_scheduler_version"},
	{optFieldSelector, "field_selector"},
}

// The options every call that decides takes: which profile, answering as which version.
const profileOptions = optSchedulerName | optKubeSchedulerVersion

const decisionOptions = optNodeNames | profileOptions | optView

func newCallConfig(method string, opts []CallOption, allowed optionSet) (*callConfig, error) {
	config := &callConfig{view: podfitv1.View_VIEW_FULL}
	for _, opt := range opts {
		if opt != nil {
			opt(config)
		}
	}
	if extra := config.used &^ allowed; extra != 0 {
		var names []string
		for _, f := range optionFields {
			if extra&f.option != 0 {
				names = append(names, f.field)
			}
		}
		return nil, invalidArgument(names[0], "%s takes no %s option", method, strings.Join(names, ", "))
	}
	return config, nil
}

func (c *callConfig) mark(o optionSet) { c.used |= o }

// NodeNames limits the candidate nodes (Filter, Score, Schedule, ScheduleBatch, Preempt); by default
// every node in the cache is one.
func NodeNames(names ...string) CallOption {
	return func(c *callConfig) { c.nodeNames = append(c.nodeNames, names...); c.mark(optNodeNames) }
}

// SchedulerName picks the scheduling profile (decisions and simulations); by default the pod's
// spec.schedulerName, then "default-scheduler".
func SchedulerName(name string) CallOption {
	return func(c *callConfig) { c.schedulerName = name; c.mark(optSchedulerName) }
}

// KubeSchedulerVersion answers as this kube-scheduler version, "v1.36" say (decisions and
// simulations); by default the profile's configured version. The response's KubeSchedulerVersion
// names the release that answered; an unsupported version is InvalidArgument.
func KubeSchedulerVersion(version string) CallOption {
	return func(c *callConfig) { c.version = version; c.mark(optKubeSchedulerVersion) }
}

// Assume reserves the pod on the selected node in the cache (Schedule), so that the next decision
// sees it there: placing pods one after another.
func Assume() CallOption {
	return func(c *callConfig) { c.assume = true; c.mark(optAssume) }
}

// DisablePreemption skips the preemption answer when nothing fits (Schedule, ScheduleBatch).
func DisablePreemption() CallOption {
	return func(c *callConfig) { c.disablePreemption = true; c.mark(optDisablePreemption) }
}

// BasicView returns only the outcome of a decision, without the per-node verdicts and scores
// (Filter, Score, Schedule, ScheduleBatch): small answers on large clusters.
func BasicView() CallOption {
	return func(c *callConfig) { c.view = podfitv1.View_VIEW_BASIC; c.mark(optView) }
}

// AllOrNothing makes ScheduleBatch assume nothing unless every pod is placed: gang scheduling.
func AllOrNothing() CallOption {
	return func(c *callConfig) { c.allOrNothing = true; c.mark(optAllOrNothing) }
}

// DryRun makes ScheduleBatch answer as the batch would place the pods, then undo every reservation.
func DryRun() CallOption {
	return func(c *callConfig) { c.dryRun = true; c.mark(optDryRun) }
}

// InNamespace lists only the objects of namespace (List).
func InNamespace(namespace string) CallOption {
	return func(c *callConfig) { c.namespace = namespace; c.mark(optNamespace) }
}

// LabelSelector lists only the objects a Kubernetes label selector ("app=web,tier!=db") matches (List).
func LabelSelector(selector string) CallOption {
	return func(c *callConfig) { c.labelSelector = selector; c.mark(optLabelSelector) }
}

// FieldSelector lists only the objects a Kubernetes field selector matches (List), evaluated by the
// server: metadata.name and metadata.namespace for every kind, and spec.nodeName for pods
// ("spec.nodeName=node-a" is one node's pods).
func FieldSelector(selector string) CallOption {
	return func(c *callConfig) { c.fieldSelector = selector; c.mark(optFieldSelector) }
}

// Limit makes List return one page of at most n objects (as Kubernetes' limit); the page's
// ContinueToken, passed with ContinueFrom, asks for the next one.
func Limit(n int32) CallOption {
	return func(c *callConfig) { c.limit = n; c.mark(optLimit) }
}

// ContinueFrom makes List return the page after the one whose ContinueToken this is (as Kubernetes'
// continue); the other List options must be the same as for that page.
func ContinueFrom(token string) CallOption {
	return func(c *callConfig) { c.continueToken = token; c.mark(optContinue) }
}

// PendingPods lists only the pods without a node (List of pods).
func PendingPods() CallOption {
	return func(c *callConfig) {
		c.podFilter = podfitv1.PodPhaseFilter_POD_PHASE_FILTER_PENDING
		c.mark(optPodFilter)
	}
}

// BoundPods lists only the pods bound to a node (List of pods).
func BoundPods() CallOption {
	return func(c *callConfig) {
		c.podFilter = podfitv1.PodPhaseFilter_POD_PHASE_FILTER_BOUND
		c.mark(optPodFilter)
	}
}

// SkipNodesWithSystemPods is cluster-autoscaler's flag of the same name (SimulateDrain; true by
// default): kube-system pods no PDB covers block their node.
func SkipNodesWithSystemPods(skip bool) CallOption {
	return func(c *callConfig) { c.skipSystemPods = &skip; c.mark(optDrain) }
}

// SkipNodesWithLocalStorage is cluster-autoscaler's flag of the same name (SimulateDrain; true by
// default): pods with local storage block their node.
func SkipNodesWithLocalStorage(skip bool) CallOption {
	return func(c *callConfig) { c.skipLocalStorage = &skip; c.mark(optDrain) }
}

// SkipNodesWithCustomControllerPods is cluster-autoscaler's flag of the same name (SimulateDrain;
// true by default): pods of controllers other than ReplicaSet, StatefulSet, ReplicationController and
// Job block their node.
func SkipNodesWithCustomControllerPods(skip bool) CallOption {
	return func(c *callConfig) { c.skipCustomPods = &skip; c.mark(optDrain) }
}

// ExpendablePodsPriorityCutoff is cluster-autoscaler's --expendable-pods-priority-cutoff (SimulateDrain;
// -10 by default): pods below it that may preempt are left out of the simulation entirely.
func ExpendablePodsPriorityCutoff(cutoff int32) CallOption {
	return func(c *callConfig) { c.expendableCutoff = &cutoff; c.mark(optDrain) }
}

// SkipTerminalPods leaves Succeeded and Failed pods out, as cluster-autoscaler's scale-down loop does
// (SimulateDrain; true by default); false runs them through the drain rules like any pod.
func SkipTerminalPods(skip bool) CallOption {
	return func(c *callConfig) { c.skipTerminalPods = &skip; c.mark(optDrain) }
}

// AllButRemovedDestinations lets SimulateDrain move pods onto later nodes of the request and earlier
// unremovable ones, as cluster-autoscaler's planner does (by default no node of the request receives pods).
func AllButRemovedDestinations() CallOption {
	return func(c *callConfig) {
		c.destinations = podfitv1.DrainDestinations_DRAIN_DESTINATIONS_ALL_BUT_REMOVED
		c.mark(optDrain)
	}
}

// MinReplicaCount is cluster-autoscaler's --min-replica-count (SimulateDrain; 0 by default):
// ReplicaSets and ReplicationControllers with fewer replicas block their pods' node.
func MinReplicaCount(n int32) CallOption {
	return func(c *callConfig) { c.minReplicaCount = n; c.mark(optDrain) }
}

// EvaluatedAt is the time SimulateDrain judges terminating pods at; by default the server's clock.
func EvaluatedAt(t time.Time) CallOption {
	return func(c *callConfig) { c.evaluatedAt = t; c.mark(optEvaluatedAt) }
}
