package podfit_test

import (
	"encoding/json"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"

	podfit "github.com/podfit/podfit/sdk/go"
	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// Conversions the SDK makes on its own, before anything is sent.
func TestToPodReference(t *testing.T) {
	t.Parallel()
	typed := &podfitv1.Pod{Metadata: &podfitv1.ObjectMeta{Name: "typed"}}
	for _, tc := range []struct {
		name string
		pod  any
		want string // the JSON sent, or the oneof case
	}{
		{"Kubernetes JSON without a kind is a Pod", json.RawMessage(`{"metadata": {"name": "p"}}`), `{"kind":"Pod","metadata":{"name":"p"}}`},
		{"a map keeps its kind", map[string]any{"kind": "Pod", "metadata": map[string]any{"name": "p"}}, `{"kind":"Pod","metadata":{"name":"p"}}`},
		{"a struct named Pod", Pod{}, `{"kind":"Pod","metadata":{"name":""}}`},
		{"a typed pod goes as is", typed, "pod"},
		{"a cached pod", podfit.Cached("shop", "web-1"), "cached"},
		{"what Get returns", &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_Pod{Pod: typed}}, "pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reference, err := podfit.ToPodReference(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch source := reference.GetSource().(type) {
			case *podfitv1.PodReference_KubernetesJson:
				got = string(source.KubernetesJson)
			case *podfitv1.PodReference_Pod:
				got = "pod"
			case *podfitv1.PodReference_Cached:
				got = "cached"
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestInputsThatAreNotObjectsAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		object any
	}{
		{"nil", nil},
		{"a string", "kind: Pod"},
		{"a Deletion outside Apply", podfit.Deletion{Kind: "Pod", Name: "p"}},
		{"a message that is no object", &podfitv1.ObjectKey{Name: "p"}},
		{"a value that does not encode", make(chan int)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := podfit.ToClusterObject(tc.object)
			var perr *podfit.Error
			if !errors.As(err, &perr) || perr.Code != codes.InvalidArgument || len(perr.FieldViolations) != 1 {
				t.Fatalf("got %v, want an InvalidArgument *podfit.Error with one field violation", err)
			}
		})
	}
	if kind, err := podfit.ObjectKind("pdb"); err != nil || kind != podfitv1.ObjectKind_OBJECT_KIND_POD_DISRUPTION_BUDGET {
		t.Errorf(`ObjectKind("pdb") = %v, %v`, kind, err)
	}
}
