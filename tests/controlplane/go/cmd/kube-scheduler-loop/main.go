// Command kube-scheduler-loop measures kube-scheduler's own scheduling loop (queue, filter, score,
// preempt, bind) on podfit bench's workloads: the yardstick beside `podfit bench`. There is no API
// server: a fake clientset holds the cluster, and a reactor turns each pods/binding create into the
// pod's spec.nodeName, so the informers and the scheduler's cache see binding as they would.
//
//	kube-scheduler-loop --workload SchedulingBasic --nodes 5000 --init-pods 10000 --pods 2000 --json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// The templates below mirror client/podfit/client/bench.py (node(), pod(), WORKLOADS).
var zones = []string{"moon-1", "moon-2", "moon-3"}

type workload struct {
	initExtra, measuredExtra func(*v1.PodSpec)
	initPriority             int32
	measuredPriority         int32
	uniqueInitLabels         bool // init pods labelled color=init-<i> (SchedulingPodAntiAffinity)
}

func spread(when v1.UnsatisfiableConstraintAction) func(*v1.PodSpec) {
	return func(s *v1.PodSpec) {
		s.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
			MaxSkew:           5,
			TopologyKey:       "topology.kubernetes.io/zone",
			WhenUnsatisfiable: when,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}},
		}}
	}
}

func podAffinity(anti bool, key string) func(*v1.PodSpec) {
	return func(s *v1.PodSpec) {
		terms := []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"color": "blue"}},
			TopologyKey:   key,
		}}
		if anti {
			s.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		} else {
			s.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: terms}}
		}
	}
}

func nodeAffinity(s *v1.PodSpec) {
	s.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
		NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
			Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"moon-1", "moon-2"},
		}}}},
	}}}
}

func none(*v1.PodSpec) {}

var workloads = map[string]workload{
	"SchedulingBasic":            {initExtra: none, measuredExtra: none},
	"TopologySpreading":          {initExtra: spread(v1.DoNotSchedule), measuredExtra: spread(v1.DoNotSchedule)},
	"PreferredTopologySpreading": {initExtra: spread(v1.ScheduleAnyway), measuredExtra: spread(v1.ScheduleAnyway)},
	"SchedulingPodAntiAffinity": {initExtra: podAffinity(true, "kubernetes.io/hostname"),
		measuredExtra: podAffinity(true, "kubernetes.io/hostname"), uniqueInitLabels: true},
	"SchedulingPodAffinity": {initExtra: podAffinity(false, "topology.kubernetes.io/zone"),
		measuredExtra: podAffinity(false, "topology.kubernetes.io/zone")},
	"SchedulingNodeAffinity": {initExtra: nodeAffinity, measuredExtra: nodeAffinity},
	// Every node holds low-priority pods; each measured high-priority pod (3.9 CPUs) must preempt.
	"PreemptionBasic": {initExtra: none, measuredExtra: none, initPriority: 1, measuredPriority: 100},
}

// Short names accepted for bench.py's workloads.
var aliases = map[string]string{"PodAntiAffinity": "SchedulingPodAntiAffinity", "PodAffinity": "SchedulingPodAffinity",
	"NodeAffinity": "SchedulingNodeAffinity"}

func node(i int) *v1.Node {
	name := fmt.Sprintf("node-%05d", i)
	n := &v1.Node{
		// A uid and resourceVersion, as every Node from an API server has: an extender that is sent
		// whole Nodes may recognise the ones it holds by them.
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zones[i%3]}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("32Gi"),
			v1.ResourcePods: resource.MustParse("110")}},
	}
	corev1defaults.SetObjectDefaults_Node(n)
	return n
}

func pod(name string, labels map[string]string, extra func(*v1.PodSpec), nodeName string, priority int32, cpu string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Labels: labels},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10", Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("500Mi")}}}},
			Priority: &priority,
			NodeName: nodeName,
		},
	}
	extra(&p.Spec)
	if nodeName != "" {
		p.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	}
	// The API server's defaulting (schedulerName above all: without it no profile owns the pod);
	// the fake clientset does none.
	corev1defaults.SetObjectDefaults_Pod(p)
	return p
}

// noEvents is a no-op event recorder factory; its result type is inferred from profile.RecorderFactory,
// which returns events.EventRecorder in v1.35 and events.EventRecorderLogger in v1.37.
func noEvents[R any](string) R { return any(&events.FakeRecorder{}).(R) }

// kubernetesVersion is the k8s.io/kubernetes module this binary was built against.
func kubernetesVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// percentile is nearest-rank, as bench.py's _percentile.
func percentile(values []float64, q float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	i := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[min(len(s)-1, max(0, i))]
}

// perSecond counts bindings in each whole second from the first one, leaving out the last, partial
// second (bench.py's _per_second).
func perSecond(times []time.Time) []float64 {
	if len(times) == 0 {
		return nil
	}
	var buckets []float64
	for _, t := range times {
		b := int(t.Sub(times[0]).Seconds())
		for len(buckets) <= b {
			buckets = append(buckets, 0)
		}
		buckets[b]++
	}
	if len(buckets) > 1 {
		buckets = buckets[:len(buckets)-1]
	}
	return buckets
}

func main() {
	name := flag.String("workload", "SchedulingBasic", "SchedulingBasic, TopologySpreading, PreferredTopologySpreading, "+
		"SchedulingPodAntiAffinity (PodAntiAffinity), SchedulingPodAffinity, SchedulingNodeAffinity or PreemptionBasic")
	nodes := flag.Int("nodes", 5000, "nodes")
	initPods := flag.Int("init-pods", 10000, "bound pods created before measuring (round robin over the nodes)")
	pods := flag.Int("pods", 1000, "measured pods")
	pct := flag.Int("percentage-of-nodes-to-score", 0, "percentageOfNodesToScore (0: kube-scheduler's adaptive default)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up when the measured pods are not all bound by then")
	asJSON := flag.Bool("json", false, "print one JSON object")
	extender := flag.String("extender", "", "an extender's URL prefix (e.g. podfit's http://127.0.0.1:8888/scheduler): "+
		"filter and prioritize are called for every pod, as deploy/kubernetes/kube-scheduler-config.yaml configures them")
	nodeCacheCapable := flag.Bool("extender-node-cache-capable", true, "send node names (true) or whole Node objects")
	flag.Parse()
	if a, ok := aliases[*name]; ok {
		*name = a
	}
	w, ok := workloads[*name]
	if !ok || *nodes < 1 || *pods < 1 || *initPods < 0 {
		fmt.Fprintf(os.Stderr, "kube-scheduler-loop: unknown workload %q or bad sizes\n", *name)
		os.Exit(2)
	}

	// The fake watchers panic once DefaultChanSize events are unread: leave room for every event.
	watch.DefaultChanSize = int32(*nodes + *initPods + *pods*8 + 1000)
	client := fake.NewSimpleClientset()
	tracker := client.Tracker()
	podsGVR := v1.SchemeGroupVersion.WithResource("pods")

	loadStart := time.Now()
	for i := range *nodes {
		must(tracker.Add(node(i)))
	}
	for i := range *initPods {
		labels := map[string]string{"color": "blue"}
		if w.uniqueInitLabels {
			labels["color"] = fmt.Sprintf("init-%d", i)
		}
		must(tracker.Add(pod(fmt.Sprintf("init-%d", i), labels, w.initExtra, fmt.Sprintf("node-%05d", i%*nodes), w.initPriority, "100m")))
	}

	// Binding as the API server does it: the pod gets spec.nodeName (a conflict if it has one).
	var mu sync.Mutex
	var bound []time.Time
	done := make(chan struct{})
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		create := a.(k8stesting.CreateAction)
		if create.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := create.GetObject().(*v1.Binding)
		obj, err := tracker.Get(podsGVR, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*v1.Pod)
		if p.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name, fmt.Errorf("pod is already assigned to node %q", p.Spec.NodeName))
		}
		p.Spec.NodeName = b.Target.Name
		if err := tracker.Update(podsGVR, p, b.Namespace); err != nil {
			return true, nil, err
		}
		if strings.HasPrefix(b.Name, "measured-") {
			mu.Lock()
			if bound = append(bound, time.Now()); len(bound) == *pods {
				close(done)
			}
			mu.Unlock()
		}
		return true, b, nil
	})
	// Preemption: count nominations (status patches setting nominatedNodeName) and victims, which go
	// at once (no kubelet, no grace period); the tracker's own reactors do the work. The counters are
	// guarded by the fake clientset's lock.
	nominations, victims := 0, 0
	client.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `"nominatedNodeName":"`) {
			nominations++
		}
		return false, nil, nil
	})
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		victims++
		return false, nil, nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	var recorders profile.RecorderFactory = noEvents
	percentage := int32(*pct)
	options := []scheduler.Option{scheduler.WithPercentageOfNodesToScore(&percentage)}
	if *extender != "" {
		options = append(options, scheduler.WithExtenders(schedulerapi.Extender{
			URLPrefix:        *extender,
			FilterVerb:       "filter",
			PrioritizeVerb:   "prioritize",
			Weight:           1,
			NodeCacheCapable: *nodeCacheCapable,
			HTTPTimeout:      metav1.Duration{Duration: 5 * time.Second},
		}))
	}
	sched, err := scheduler.New(ctx, client, informerFactory, nil, recorders, options...)
	must(err)
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	must(sched.WaitForHandlersSync(ctx))
	loadSeconds := time.Since(loadStart).Seconds()
	go sched.Run(ctx)

	// All measured pods at once, as scheduler_perf's createPods; the clock runs from the first create.
	cpu := "100m"
	if w.measuredPriority > w.initPriority {
		cpu = "3900m" // fits on no node without evicting (bench.py's preemptor)
	}
	measured := make([]*v1.Pod, *pods) // built off the clock
	for i := range measured {
		measured[i] = pod(fmt.Sprintf("measured-%d", i), map[string]string{"color": "blue"}, w.measuredExtra, "", w.measuredPriority, cpu)
	}
	var usage syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &usage))
	cpuBefore := time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	start := time.Now()
	for _, p := range measured {
		_, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		must(err)
	}
	createSeconds := time.Since(start).Seconds()
	select {
	case <-done:
	case <-time.After(*timeout):
		mu.Lock()
		fmt.Fprintf(os.Stderr, "kube-scheduler-loop: %d of %d measured pods bound after %s\n", len(bound), *pods, *timeout)
		mu.Unlock()
		list, _ := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		for _, p := range list.Items {
			if p.Spec.NodeName == "" && len(p.Status.Conditions) > 0 { // why the first unbound pod is pending
				fmt.Fprintf(os.Stderr, "  %s: %s\n", p.Name, p.Status.Conditions[0].Message)
				break
			}
		}
		os.Exit(1)
	}
	mu.Lock()
	seconds := bound[len(bound)-1].Sub(start).Seconds()
	perSec := perSecond(bound)
	mu.Unlock()
	client.Lock()
	nominated, deleted := nominations, victims
	client.Unlock()

	// CPU time of this whole process (the scheduler, its informers and the fake API) while measuring,
	// to tell what a run's seconds were spent on when an extender shares the machine.
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &usage))
	cpuSeconds := (time.Duration(usage.Utime.Nano()+usage.Stime.Nano()) - cpuBefore).Seconds()
	round := func(v float64, digits int) float64 { p := math.Pow(10, float64(digits)); return math.Round(v*p) / p }
	result := map[string]any{
		"tool":                         "kube-scheduler-loop",
		"kubernetes":                   kubernetesVersion(),
		"workload":                     *name,
		"nodes":                        *nodes,
		"init_pods":                    *initPods,
		"pods":                         *pods,
		"percentage_of_nodes_to_score": *pct,
		"gomaxprocs":                   runtime.GOMAXPROCS(0),
		"seconds":                      round(seconds, 3),
		"create_seconds":               round(createSeconds, 3),
		"load_seconds":                 round(loadSeconds, 2),
		"ms_per_pod":                   round(seconds*1000/float64(*pods), 3),
		"throughput":                   map[string]float64{"avg": round(float64(*pods)/seconds, 1), "p50": percentile(perSec, 50), "p90": percentile(perSec, 90), "p99": percentile(perSec, 99)},
		"preemptions":                  nominated,
		"preemptions_per_second":       round(float64(nominated)/seconds, 1),
		"preemption_victims":           deleted,
		"extender":                     *extender,
		"cpu_seconds":                  round(cpuSeconds, 3),
	}
	if *asJSON {
		must(json.NewEncoder(os.Stdout).Encode(result))
		return
	}
	t := result["throughput"].(map[string]float64)
	fmt.Printf("kube-scheduler %s loop, %s %d nodes / %d init pods / %d pods (percentageOfNodesToScore %d, GOMAXPROCS %d): "+
		"%.1f pods/s avg, per second p50 %.0f p90 %.0f p99 %.0f; %.3f s; %d preemptions, %d victims\n",
		result["kubernetes"], *name, *nodes, *initPods, *pods, *pct, runtime.GOMAXPROCS(0), t["avg"], t["p50"], t["p90"], t["p99"], seconds, nominated, deleted)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-scheduler-loop:", err)
		os.Exit(1)
	}
}
