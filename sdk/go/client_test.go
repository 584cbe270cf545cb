package podfit_test

// The example cluster (deploy/examples) through the SDK, against a real podfit-server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	podfit "github.com/podfit/podfit/sdk/go"
	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// pod is a pending pod of namespace shop asking for cpu, with more spec fields in extra.
func pod(name, cpu string, extra map[string]any) map[string]any {
	spec := map[string]any{"containers": []any{map[string]any{
		"name": "c", "resources": map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "1Gi"}},
	}}}
	for key, value := range extra {
		spec[key] = value
	}
	return map[string]any{
		"kind":     "Pod",
		"metadata": map[string]any{"name": name, "namespace": "shop", "labels": map[string]any{"app": "extra"}},
		"spec":     spec,
	}
}

func node(name, cpu string) map[string]any {
	return map[string]any{
		"kind":     "Node",
		"metadata": map[string]any{"name": name},
		"status":   map[string]any{"allocatable": map[string]any{"cpu": cpu, "memory": "16Gi", "pods": "110"}},
	}
}

func stats(t *testing.T, client *podfit.Client) *podfitv1.StatsResponse {
	t.Helper()
	response, err := client.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return response
}

func TestScheduleWithAssumePicksNodeBAndMovesTheGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClusterClient(t)
	before := stats(t, client)
	if before.GetNodes() != 3 || before.GetPods() != 2 {
		t.Fatalf("the example cluster has 3 nodes and 2 pods, got %d and %d", before.GetNodes(), before.GetPods())
	}

	decision, err := client.Schedule(ctx, examplePod(t), podfit.Assume())
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}

	// As `podfit schedule -f deploy/examples/pod.yaml` shows.
	if got := decision.GetSelectedNode(); got != "node-b" {
		t.Errorf("selected node = %q, want node-b", got)
	}
	if got := decision.GetBestNodes(); !slices.Equal(got, []string{"node-b"}) {
		t.Errorf("best nodes = %v, want [node-b]", got)
	}
	var totals []string
	for _, score := range decision.GetScores() {
		totals = append(totals, fmt.Sprintf("%s=%d", score.GetNodeName(), score.GetTotal()))
	}
	if want := []string{"node-b=604", "node-a=438"}; !slices.Equal(totals, want) {
		t.Errorf("scores = %v, want %v", totals, want)
	}
	for _, verdict := range decision.GetNodes() {
		if verdict.GetNodeName() == "node-gpu" && (verdict.GetFits() || verdict.GetPlugin() != "TaintToleration") {
			t.Errorf("node-gpu: fits=%v plugin=%q, want rejected by TaintToleration", verdict.GetFits(), verdict.GetPlugin())
		}
	}
	after := stats(t, client)
	if decision.GetAssumedGeneration() != before.GetGeneration()+1 || after.GetGeneration() != decision.GetAssumedGeneration() {
		t.Errorf("generations: before %d, assumed %d, after %d", before.GetGeneration(), decision.GetAssumedGeneration(), after.GetGeneration())
	}
	if after.GetBoundPods() != before.GetBoundPods()+1 {
		t.Errorf("bound pods %d -> %d, want one more", before.GetBoundPods(), after.GetBoundPods())
	}
	assumed, err := client.Get(ctx, "pods", "shop", "web-2")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := assumed.GetObject().GetPod().GetSpec().GetNodeName(); got != "node-b" {
		t.Errorf("the assumed pod's nodeName = %q, want node-b", got)
	}
}

func TestStreamAcknowledgesBatchesInOrderAndRefusesABadOneInBand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server := startServer(t, nil)
	client := dial(t, server.target, podfit.WithInsecure())
	cluster := exampleCluster(t)

	stream, err := client.Stream(ctx)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	batches := [][]any{
		{cluster[:4]}, // the namespace and the nodes
		{cluster[4:]},
		{json.RawMessage(`{"kind": "Pod", "metadata": {}}`)}, // no name: refused, nothing applied
		{pod("late", "100m", nil), podfit.Deletion{Kind: "pdb", Namespace: "shop", Name: "web"}},
	}
	for i, batch := range batches {
		sequence, err := stream.Send(batch...)
		if err != nil {
			t.Fatalf("Send(batch %d): %v", i, err)
		}
		if sequence != uint64(i+1) {
			t.Errorf("batch %d went as sequence %d", i, sequence)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatalf("CloseSend: %v", err)
	}
	var acks []*podfitv1.StreamResponse
	for {
		ack, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		acks = append(acks, ack)
	}

	if len(acks) != len(batches) {
		t.Fatalf("%d acknowledgements for %d batches", len(acks), len(batches))
	}
	var generations []int64
	for i, ack := range acks {
		if ack.GetSequence() != uint64(i+1) {
			t.Errorf("acknowledgement %d has sequence %d", i, ack.GetSequence())
		}
		generations = append(generations, ack.GetGeneration())
	}
	if want := []int64{1, 2, 0, 3}; !slices.Equal(generations, want) {
		t.Errorf("generations = %v, want %v", generations, want)
	}
	if refused := acks[2]; refused.GetError() == "" || refused.GetErrorField() != "updates[0].upsert.pod.metadata.name" {
		t.Errorf("the bad batch: error %q at %q, want refused at updates[0].upsert.pod.metadata.name",
			refused.GetError(), refused.GetErrorField())
	}
	if got := acks[3].GetAppliedCount(); got != 2 {
		t.Errorf("the batch after the bad one applied %d updates, want 2", got)
	}
	// What was acknowledged is what the next call sees.
	if s := stats(t, client); s.GetPods() != 3 || s.GetPodDisruptionBudgets() != 0 || s.GetGeneration() != 3 {
		t.Errorf("after the stream: %d pods, %d PDBs, generation %d", s.GetPods(), s.GetPodDisruptionBudgets(), s.GetGeneration())
	}
}

func TestInvalidInputIsAnInvalidArgumentErrorWithTheFieldPath(t *testing.T) {
	t.Parallel()
	client := newClusterClient(t)
	generation := stats(t, client).GetGeneration()

	for _, tc := range []struct {
		name   string
		call   func(ctx context.Context) error
		field  string
		reason string // "" for refusals made by the SDK itself
	}{
		{
			name: "a node with cpu lots, second in the batch",
			call: func(ctx context.Context) error {
				_, err := client.Apply(ctx, node("n9", "4"), node("n10", "lots"))
				return err
			},
			field:  "updates[1].upsert.node.status.allocatable.cpu",
			reason: "INVALID_OBJECT",
		},
		{
			name: "a typed pod with cpu lots",
			call: func(ctx context.Context) error {
				bad := &podfitv1.Pod{
					Metadata: &podfitv1.ObjectMeta{Name: "typed", Namespace: "shop"},
					Spec: &podfitv1.PodSpec{Containers: []*podfitv1.Container{{
						Name:      "c",
						Resources: &podfitv1.ResourceRequirements{Requests: map[string]string{"cpu": "lots"}},
					}}},
				}
				_, err := client.Schedule(ctx, bad)
				return err
			},
			field:  "pod.pod.spec.containers[0].resources.requests.cpu",
			reason: "INVALID_OBJECT",
		},
		{
			name: "an unknown profile",
			call: func(ctx context.Context) error {
				_, err := client.Filter(ctx, examplePod(t), podfit.SchedulerName("no-such-scheduler"))
				return err
			},
			field:  "scheduler_name",
			reason: "UNKNOWN_PROFILE",
		},
		{
			name: "an unknown kind, refused before sending",
			call: func(ctx context.Context) error {
				_, err := client.Get(ctx, "widgets", "", "w")
				return err
			},
			field: "key.kind",
		},
		{
			name: "an option Filter does not take",
			call: func(ctx context.Context) error {
				_, err := client.Filter(ctx, examplePod(t), podfit.Assume())
				return err
			},
			field: "assume",
		},
		{
			name: "a string where an object belongs",
			call: func(ctx context.Context) error {
				_, err := client.Apply(ctx, node("ok", "1"), "kind: Node")
				return err
			},
			field: "updates[1].upsert",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(context.Background())

			var perr *podfit.Error
			if !errors.As(err, &perr) {
				t.Fatalf("got %T %v, want a *podfit.Error", err, err)
			}
			if perr.Code != codes.InvalidArgument {
				t.Errorf("code = %v, want InvalidArgument (%v)", perr.Code, perr)
			}
			if len(perr.FieldViolations) == 0 || perr.FieldViolations[0].Field != tc.field {
				t.Errorf("field violations = %+v, want the first at %q", perr.FieldViolations, tc.field)
			}
			if perr.Reason != tc.reason {
				t.Errorf("reason = %q, want %q", perr.Reason, tc.reason)
			}
			// The gRPC view of the same error, details included.
			st, ok := status.FromError(err)
			if !ok || st.Code() != codes.InvalidArgument || len(st.Details()) == 0 {
				t.Errorf("status.FromError = %v, %v (details %v)", st, ok, st.Details())
			}
		})
	}
	// Nothing of the refused requests reached the cache.
	if got := stats(t, client).GetGeneration(); got != generation {
		t.Errorf("generation moved from %d to %d", generation, got)
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := startServer(t, []string{"--auth-token-file", tokenFile})

	// Over plaintext only when allowed explicitly.
	if _, err := podfit.Dial(ctx, server.target, podfit.WithInsecure(), podfit.WithToken("s3cret")); err == nil {
		t.Error("Dial sent a token over plaintext without WithAllowInsecureToken")
	}

	for _, tc := range []struct {
		name string
		opts []podfit.Option
		want codes.Code
	}{
		{"the token", []podfit.Option{podfit.WithToken("s3cret")}, codes.OK},
		{"no token", nil, codes.Unauthenticated},
		{"a wrong token", []podfit.Option{podfit.WithToken("guess")}, codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dial(t, server.target, append(tc.opts, podfit.WithInsecure(), podfit.WithAllowInsecureToken())...)
			_, err := client.Stats(ctx)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("Stats: code %v (%v), want %v", got, err, tc.want)
			}
			var perr *podfit.Error
			if err != nil && (!errors.As(err, &perr) || perr.Code != tc.want) {
				t.Errorf("Stats: %T %v, want a *podfit.Error with code %v", err, err, tc.want)
			}
		})
	}
}

func TestSimulateDrainBlocksNodeAOnItsPDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClusterClient(t)
	generation := stats(t, client).GetGeneration()

	// As `podfit drain node-a --dry-run` shows.
	drain, err := client.SimulateDrain(ctx, []string{"node-a"})
	if err != nil {
		t.Fatalf("SimulateDrain: %v", err)
	}
	if drain.GetBaseGeneration() != generation || len(drain.GetNodes()) != 1 {
		t.Fatalf("SimulateDrain answered %v", drain)
	}
	nodeA := drain.GetNodes()[0]
	if nodeA.GetNodeName() != "node-a" || nodeA.GetRemovable() || nodeA.GetUnremovableReason() != "BlockedByPod" {
		t.Errorf("node-a: removable=%v reason=%q, want BlockedByPod", nodeA.GetRemovable(), nodeA.GetUnremovableReason())
	}
	if blocking := nodeA.GetBlockingPod(); blocking.GetReason() != "NotEnoughPdb" || blocking.GetNamespace()+"/"+blocking.GetName() != "shop/web-1" {
		t.Errorf("blocking pod: %v, want shop/web-1 NotEnoughPdb", blocking)
	}

	// node-gpu has nothing to move; the options reach the server.
	gpu, err := client.SimulateDrain(ctx, []string{"node-gpu"},
		podfit.EvaluatedAt(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)), podfit.SkipNodesWithLocalStorage(false), podfit.MinReplicaCount(1))
	if err != nil {
		t.Fatalf("SimulateDrain(node-gpu): %v", err)
	}
	if !gpu.GetNodes()[0].GetRemovable() {
		t.Errorf("node-gpu is not removable: %v", gpu.GetNodes()[0])
	}
	if got := stats(t, client).GetGeneration(); got != generation {
		t.Errorf("a simulation moved the generation from %d to %d", generation, got)
	}
}

func TestDecisionsAndSimulations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClusterClient(t)
	thePod := examplePod(t)

	t.Run("filter and score; NodeNames narrows the candidates", func(t *testing.T) {
		filtered, err := client.Filter(ctx, thePod)
		if err != nil {
			t.Fatal(err)
		}
		var fits []string
		for _, verdict := range filtered.GetNodes() {
			if verdict.GetFits() {
				fits = append(fits, verdict.GetNodeName())
			}
		}
		if !slices.Equal(fits, []string{"node-a", "node-b"}) || filtered.GetFeasibleCount() != 2 {
			t.Errorf("feasible: %v (count %d)", fits, filtered.GetFeasibleCount())
		}
		scored, err := client.Score(ctx, thePod, podfit.NodeNames("node-a"))
		if err != nil {
			t.Fatal(err)
		}
		if len(scored.GetScores()) != 1 || scored.GetScores()[0].GetNodeName() != "node-a" {
			t.Errorf("scores: %v", scored.GetScores())
		}
	})

	t.Run("the basic view carries only the outcome; without Assume nothing changes", func(t *testing.T) {
		generation := stats(t, client).GetGeneration()
		decision, err := client.Schedule(ctx, thePod, podfit.BasicView())
		if err != nil {
			t.Fatal(err)
		}
		if decision.GetSelectedNode() != "node-b" || len(decision.GetNodes()) != 0 || decision.GetFeasibleCount() != 2 {
			t.Errorf("basic view: %v", decision)
		}
		if got := stats(t, client).GetGeneration(); got != generation {
			t.Errorf("generation moved from %d to %d", generation, got)
		}
	})

	t.Run("preempt names the victims", func(t *testing.T) {
		urgent := readManifests(t, "urgent-pod.yaml")[0]
		answer, err := client.Preempt(ctx, urgent)
		if err != nil {
			t.Fatal(err)
		}
		var victims []string
		for _, victim := range answer.GetVictims() {
			victims = append(victims, victim.GetNamespace()+"/"+victim.GetName())
		}
		if answer.GetNominatedNode() != "node-b" || !slices.Equal(victims, []string{"shop/batch-1"}) {
			t.Errorf("preempt: node %q, victims %v", answer.GetNominatedNode(), victims)
		}
	})

	t.Run("simulate a scenario: cordon node-b, add a hypothetical node", func(t *testing.T) {
		template, err := podfit.ToClusterObject(map[string]any{
			"kind":     "Node",
			"metadata": map[string]any{"name": "big", "labels": map[string]any{"disktype": "ssd"}},
			"status":   map[string]any{"allocatable": map[string]any{"cpu": "16", "memory": "64Gi", "pods": "110"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		scenario := &podfitv1.Scenario{
			CordonNodes: []string{"node-b"},
			AddNodes:    []*podfitv1.HypotheticalNodes{{Template: template, Count: 1}},
		}
		result, err := client.Simulate(ctx, scenario, []any{thePod, pod("s2", "10", nil)})
		if err != nil {
			t.Fatal(err)
		}
		var placed []string
		for _, placement := range result.GetPlacements() {
			placed = append(placed, placement.GetName()+"@"+placement.GetNodeName())
		}
		if !slices.Equal(placed, []string{"web-2@node-a", "s2@big-sim-0"}) {
			t.Errorf("placements: %v", placed)
		}
	})

	t.Run("estimate scale-up: three 3-CPU pods need two 4-CPU nodes, and the group allows two", func(t *testing.T) {
		template := map[string]any{ // no kind: the template of a node group is a Node
			"metadata": map[string]any{"name": "tmpl"},
			"status":   map[string]any{"allocatable": map[string]any{"cpu": "4", "memory": "16Gi", "pods": "110"}},
		}
		pending := []any{pod("e1", "3", nil), pod("e2", "3", nil), pod("e3", "3", nil)}
		estimate, err := client.EstimateScaleUp(ctx, [][]any{pending},
			[]podfit.NodeGroup{{ID: "pool", Template: template, CurrentSize: 0, MaxSize: 2}})
		if err != nil {
			t.Fatal(err)
		}
		pool := estimate.GetEstimates()[0]
		if pool.GetNodeGroupId() != "pool" || pool.GetNodeCount() != 2 || len(pool.GetUnscheduled()) != 1 {
			t.Errorf("estimate: %v", pool)
		}
	})

	t.Run("estimate scale-up of a GPU group: its template's ResourceSlices give each new node two GPUs", func(t *testing.T) {
		gpu := map[string]any{"name": "gpu", "exactly": map[string]any{"deviceClassName": "sdk-gpu"}}
		objects := []any{map[string]any{
			"kind":     "DeviceClass",
			"metadata": map[string]any{"name": "sdk-gpu"},
			"spec": map[string]any{"selectors": []any{map[string]any{
				"cel": map[string]any{"expression": `device.driver == "gpu.sdk.example.com"`},
			}}},
		}}
		var pending []any
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("gpu-claim-%d", i)
			objects = append(objects, map[string]any{
				"kind":     "ResourceClaim",
				"metadata": map[string]any{"name": name, "namespace": "shop"},
				"spec":     map[string]any{"devices": map[string]any{"requests": []any{gpu}}},
			})
			claims := []any{map[string]any{"name": "gpu", "resourceClaimName": name}}
			pending = append(pending, pod(fmt.Sprintf("g%d", i), "100m", map[string]any{"resourceClaims": claims}))
		}
		if _, err := client.Apply(ctx, objects...); err != nil {
			t.Fatal(err)
		}
		template := map[string]any{
			"metadata": map[string]any{"name": "gpu-tmpl"},
			"status":   map[string]any{"allocatable": map[string]any{"cpu": "8", "memory": "32Gi", "pods": "110"}},
		}
		slice := map[string]any{
			"metadata": map[string]any{"name": "gpus"},
			"spec": map[string]any{
				"nodeName": "gpu-tmpl", "driver": "gpu.sdk.example.com",
				"pool":    map[string]any{"name": "gpus", "generation": 1, "resourceSliceCount": 1},
				"devices": []any{map[string]any{"name": "gpu-0"}, map[string]any{"name": "gpu-1"}},
			},
		}
		var groups [][]any
		for _, p := range pending {
			groups = append(groups, []any{p})
		}
		estimate, err := client.EstimateScaleUp(ctx, groups, []podfit.NodeGroup{
			{ID: "gpus", Template: template, MaxSize: 5, ResourceSlices: []any{slice}},
			{ID: "none", Template: template, MaxSize: 5},
		})
		if err != nil {
			t.Fatal(err)
		}
		withSlices, without := estimate.GetEstimates()[0], estimate.GetEstimates()[1]
		if withSlices.GetNodeCount() != 2 || len(withSlices.GetScheduled()) != 3 || without.GetNodeCount() != 0 {
			t.Errorf("estimate: %v", estimate.GetEstimates())
		}
	})

	t.Run("schedule a batch: all or nothing undoes a partial one", func(t *testing.T) {
		generation := stats(t, client).GetGeneration()
		big := map[string]any{"nodeSelector": map[string]any{"disktype": "ssd"}}
		gang, err := client.ScheduleBatch(ctx, []any{pod("g1", "3", big), pod("g2", "3", big)}, podfit.AllOrNothing())
		if err != nil {
			t.Fatal(err)
		}
		if gang.GetAllPlaced() || gang.GetPlacedCount() != 0 || stats(t, client).GetGeneration() != generation {
			t.Errorf("all or nothing: %v", gang)
		}
		dry, err := client.ScheduleBatch(ctx, []any{pod("d1", "1", nil), pod("d2", "1", nil)}, podfit.DryRun(), podfit.BasicView())
		if err != nil {
			t.Fatal(err)
		}
		for _, answer := range dry.GetResults() {
			if answer.GetSelectedNode() == "" || answer.GetAssumedGeneration() != 0 {
				t.Errorf("dry run: %v", answer)
			}
		}
		if stats(t, client).GetGeneration() != generation {
			t.Errorf("a dry run changed the cache: %v", dry)
		}
		batch, err := client.ScheduleBatch(ctx, []any{pod("b1", "1", nil), pod("b2", "1", nil)}, podfit.BasicView())
		if err != nil {
			t.Fatal(err)
		}
		if !batch.GetAllPlaced() || batch.GetAssumedGeneration() != generation+2 {
			t.Errorf("batch: %v", batch)
		}
		// A pending pod of the cache, by reference.
		if _, err := client.Apply(ctx, pod("pending", "100m", nil)); err != nil {
			t.Fatal(err)
		}
		decision, err := client.Schedule(ctx, podfit.Cached("shop", "pending"), podfit.DisablePreemption())
		if err != nil {
			t.Fatal(err)
		}
		if decision.GetSelectedNode() == "" {
			t.Errorf("the cached pod fits nowhere: %v", decision)
		}
	})
}

// Pod stands for a k8s.io/api corev1.Pod: a Go struct of Kubernetes' JSON shape whose TypeMeta a typed
// client left empty.
type Pod struct {
	Kind     string `json:"kind,omitempty"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
}

func TestApplyTakesObjectsAsTheCallerHoldsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := startServer(t, nil)
	client := dial(t, server.target, podfit.WithInsecure())

	typedPod := Pod{}
	typedPod.Metadata.Name, typedPod.Metadata.Namespace = "from-struct", "shop"
	for _, tc := range []struct {
		name   string
		object any
		kind   podfitv1.ObjectKind
		key    string
	}{
		{"a typed message", &podfitv1.Node{Metadata: &podfitv1.ObjectMeta{Name: "typed"}}, podfitv1.ObjectKind_OBJECT_KIND_NODE, "typed"},
		{"a map", node("from-map", "2"), podfitv1.ObjectKind_OBJECT_KIND_NODE, "from-map"},
		{"Kubernetes JSON", json.RawMessage(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}`), podfitv1.ObjectKind_OBJECT_KIND_NAMESPACE, "shop"},
		{"a struct without a kind, named after it", &typedPod, podfitv1.ObjectKind_OBJECT_KIND_POD, "shop/from-struct"},
		{"a ClusterObject", &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_KubernetesJson{
			KubernetesJson: []byte(`{"kind": "Node", "metadata": {"name": "raw"}}`)}}, podfitv1.ObjectKind_OBJECT_KIND_NODE, "raw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			response, err := client.Apply(ctx, tc.object)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			result := response.GetResults()[0]
			key := result.GetKey().GetName()
			if result.GetKey().GetNamespace() != "" {
				key = result.GetKey().GetNamespace() + "/" + key
			}
			if result.GetOutcome() != podfitv1.UpdateOutcome_UPDATE_OUTCOME_APPLIED || result.GetKey().GetKind() != tc.kind || key != tc.key {
				t.Errorf("result %v, want %v %s applied", result, tc.kind, tc.key)
			}
		})
	}

	// Slices are spread, deletes ride in the same atomic batch, and Replace relists one kind.
	response, err := client.Apply(ctx, []map[string]any{node("n1", "1"), node("n2", "1")}, podfit.Deletion{Kind: "no", Name: "typed"})
	if err != nil || response.GetAppliedCount() != 3 {
		t.Fatalf("Apply(slice, deletion) = %v, %v", response, err)
	}
	replaced, err := client.Replace(ctx, "Node", map[string]any{"metadata": map[string]any{"name": "only"}})
	if err != nil || replaced.GetUpsertedCount() != 1 || replaced.GetDeletedCount() != 4 {
		t.Fatalf("Replace = %v, %v", replaced, err)
	}
	nodes, err := client.List(ctx, "nodes")
	if err != nil || len(nodes.GetObjects()) != 1 || nodes.GetObjects()[0].GetNode().GetMetadata().GetName() != "only" {
		t.Fatalf("List(nodes) = %v, %v", nodes, err)
	}
	pods, err := client.List(ctx, "Pod", podfit.InNamespace("shop"), podfit.PendingPods())
	if err != nil || len(pods.GetObjects()) != 1 {
		t.Fatalf("List(pending pods of shop) = %v, %v", pods, err)
	}
	named, err := client.List(ctx, "Pod", podfit.FieldSelector("metadata.name=from-struct,metadata.namespace=shop"))
	if err != nil || len(named.GetObjects()) != 1 || named.GetObjects()[0].GetPod().GetMetadata().GetName() != "from-struct" {
		t.Fatalf("List(field selector) = %v, %v", named, err)
	}
	if _, err := client.List(ctx, "nodes", podfit.FieldSelector("spec.nodeName=x")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("List(nodes by spec.nodeName): %v, want InvalidArgument", err)
	}
	deleted, err := client.Delete(ctx, "Pod", "shop", "from-struct")
	if err != nil || deleted.GetAppliedCount() != 1 {
		t.Fatalf("Delete = %v, %v", deleted, err)
	}
	_, err = client.Get(ctx, "Pod", "shop", "from-struct")
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Get of a deleted pod: %v, want NotFound", err)
	}
}

func TestListPagesWithLimitAndContinueFrom(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := startServer(t, nil)
	client := dial(t, server.target, podfit.WithInsecure())
	if _, err := client.Apply(ctx, []map[string]any{node("a", "1"), node("b", "1"), node("c", "1")}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	first, err := client.List(ctx, "nodes", podfit.Limit(2))
	if err != nil || len(first.GetObjects()) != 2 || first.GetContinueToken() == "" || first.GetRemainingItemCount() != 1 {
		t.Fatalf("List(limit 2) = %v, %v", first, err)
	}
	second, err := client.List(ctx, "nodes", podfit.ContinueFrom(first.GetContinueToken()))
	if err != nil || len(second.GetObjects()) != 1 || second.GetObjects()[0].GetNode().GetMetadata().GetName() != "c" ||
		second.GetContinueToken() != "" {
		t.Fatalf("List(continue) = %v, %v", second, err)
	}
	all, err := client.List(ctx, "nodes")
	if err != nil || len(all.GetObjects()) != 3 {
		t.Fatalf("List(all) = %v, %v", all, err)
	}
	_, err = client.List(ctx, "nodes", podfit.ContinueFrom("garbage"))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("List(garbage token): %v, want InvalidArgument", err)
	}
}

func TestAnExpiredContextIsDeadlineExceeded(t *testing.T) {
	t.Parallel()
	client := dial(t, "127.0.0.1:1", podfit.WithInsecure())
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()

	_, err := client.Stats(ctx)

	var perr *podfit.Error
	if !errors.As(err, &perr) || perr.Code != codes.DeadlineExceeded {
		t.Fatalf("Stats: %T %v, want a *podfit.Error with DeadlineExceeded", err, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("errors.Is(err, context.DeadlineExceeded) = %v, status.Code = %v", errors.Is(err, context.DeadlineExceeded), status.Code(err))
	}
}

func TestWaitForSyncRefusesDecisionsUntilMarkSynced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := startServer(t, []string{"--wait-for-sync"})
	client := dial(t, server.target, podfit.WithInsecure())
	if _, err := client.Apply(ctx, json.RawMessage(`{"kind": "Node", "metadata": {"name": "n1"},
		"status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}`)); err != nil {
		t.Fatalf("Apply before the sync: %v", err)
	}
	pod := json.RawMessage(`{"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}`)
	_, err := client.Schedule(ctx, pod)
	var perr *podfit.Error
	if !errors.As(err, &perr) || perr.Code != codes.FailedPrecondition || perr.Reason != "CACHE_NOT_SYNCED" {
		t.Fatalf("Schedule before the sync: %v, want FailedPrecondition CACHE_NOT_SYNCED", err)
	}
	marked, err := client.MarkSynced(ctx, "go-sdk-test")
	if err != nil {
		t.Fatalf("MarkSynced: %v", err)
	}
	stats := stats(t, client)
	if !stats.GetSynced() || marked.GetServerEpoch() == "" || marked.GetServerEpoch() != stats.GetServerEpoch() {
		t.Fatalf("after MarkSynced: synced=%v epochs %q / %q", stats.GetSynced(), marked.GetServerEpoch(), stats.GetServerEpoch())
	}
	decision, err := client.Schedule(ctx, pod)
	if err != nil || decision.GetSelectedNode() != "n1" {
		t.Fatalf("Schedule after the sync: %v, %v", decision, err)
	}
}

// TestKubeSchedulerVersionPicksWhichReleaseAnswers asks the example pod as each supported version: the
// answer names its release, and v1.35's balanced-allocation formula gives node-b the total
// `podfit schedule --kube-scheduler-version v1.35` prints (v1.36 scores balance as v1.37 does).
func TestKubeSchedulerVersionPicksWhichReleaseAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClusterClient(t)
	for _, tc := range []struct {
		version, release string
		nodeB            int64
	}{
		{"", "v1.37.2", 604},
		{"v1.35", "v1.35.4", 599},
		{"v1.36", "v1.36.3", 604},
		{"v1.37", "v1.37.2", 604},
	} {
		decision, err := client.Schedule(ctx, examplePod(t), podfit.KubeSchedulerVersion(tc.version))
		if err != nil {
			t.Fatalf("Schedule as %q: %v", tc.version, err)
		}
		if got := decision.GetKubeSchedulerVersion(); got != tc.release {
			t.Errorf("Schedule as %q answered as %q, want %q", tc.version, got, tc.release)
		}
		if got := decision.GetScores()[0]; got.GetNodeName() != "node-b" || got.GetTotal() != tc.nodeB {
			t.Errorf("Schedule as %q: best %s=%d, want node-b=%d", tc.version, got.GetNodeName(), got.GetTotal(), tc.nodeB)
		}
	}
	_, err := client.Filter(ctx, examplePod(t), podfit.KubeSchedulerVersion("v1.38"))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Filter as v1.38: %v, want InvalidArgument", err)
	}
	var fieldErr *podfit.Error
	if !errors.As(err, &fieldErr) || len(fieldErr.FieldViolations) == 0 || fieldErr.FieldViolations[0].Field != "kube_scheduler_version" {
		t.Errorf("Filter as v1.38: %v, want a violation at kube_scheduler_version", err)
	}
	if got := stats(t, client).GetSupportedKubeSchedulerVersions(); !slices.Equal(got, []string{"v1.35.4", "v1.36.3", "v1.37.2"}) {
		t.Errorf("Stats: supported versions %v", got)
	}
}

func TestSimulateDrainLeavesExpendablePodsOutUnlessTheCutoffSaysOtherwise(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := newClusterClient(t)
	// A bare pod (no controller: it would block as NotReplicated) of priority -100 on node-gpu.
	cheap := pod("cheap", "100m", map[string]any{"nodeName": "node-gpu", "priority": -100})
	if _, err := client.Apply(ctx, cheap); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		opts      []podfit.CallOption
		removable bool
	}{
		{"below the default cutoff of -10: left out", nil, true},
		{"above a cutoff of -1000: it blocks", []podfit.CallOption{podfit.ExpendablePodsPriorityCutoff(-1000)}, false},
	} {
		drain, err := client.SimulateDrain(ctx, []string{"node-gpu"}, tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := drain.GetNodes()[0].GetRemovable(); got != tc.removable {
			t.Errorf("%s: removable=%v, want %v (%v)", tc.name, got, tc.removable, drain.GetNodes()[0])
		}
	}
}
