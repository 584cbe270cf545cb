package podfit

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// Kubernetes kinds podfit holds, with their ObjectKind.
var kinds = map[string]podfitv1.ObjectKind{
	"Node":                  podfitv1.ObjectKind_OBJECT_KIND_NODE,
	"Pod":                   podfitv1.ObjectKind_OBJECT_KIND_POD,
	"Namespace":             podfitv1.ObjectKind_OBJECT_KIND_NAMESPACE,
	"PodDisruptionBudget":   podfitv1.ObjectKind_OBJECT_KIND_POD_DISRUPTION_BUDGET,
	"Service":               podfitv1.ObjectKind_OBJECT_KIND_SERVICE,
	"ReplicaSet":            podfitv1.ObjectKind_OBJECT_KIND_REPLICA_SET,
	"StatefulSet":           podfitv1.ObjectKind_OBJECT_KIND_STATEFUL_SET,
	"ReplicationController": podfitv1.ObjectKind_OBJECT_KIND_REPLICATION_CONTROLLER,
	"Job":                   podfitv1.ObjectKind_OBJECT_KIND_JOB,
	"DaemonSet":             podfitv1.ObjectKind_OBJECT_KIND_DAEMON_SET,
	"StorageClass":          podfitv1.ObjectKind_OBJECT_KIND_STORAGE_CLASS,
	"PersistentVolume":      podfitv1.ObjectKind_OBJECT_KIND_PERSISTENT_VOLUME,
	"PersistentVolumeClaim": podfitv1.ObjectKind_OBJECT_KIND_PERSISTENT_VOLUME_CLAIM,
	"CSINode":               podfitv1.ObjectKind_OBJECT_KIND_CSI_NODE,
	"CSIDriver":             podfitv1.ObjectKind_OBJECT_KIND_CSI_DRIVER,
	"CSIStorageCapacity":    podfitv1.ObjectKind_OBJECT_KIND_CSI_STORAGE_CAPACITY,
	"VolumeAttachment":      podfitv1.ObjectKind_OBJECT_KIND_VOLUME_ATTACHMENT,
	"DeviceClass":           podfitv1.ObjectKind_OBJECT_KIND_DEVICE_CLASS,
	"ResourceSlice":         podfitv1.ObjectKind_OBJECT_KIND_RESOURCE_SLICE,
	"ResourceClaim":         podfitv1.ObjectKind_OBJECT_KIND_RESOURCE_CLAIM,
}

// kubectl's spellings, as the Python SDK and the CLI accept them (besides each kind in lower case).
var kindAliases = map[string]string{
	"nodes":                  "Node",
	"no":                     "Node",
	"pods":                   "Pod",
	"po":                     "Pod",
	"namespaces":             "Namespace",
	"ns":                     "Namespace",
	"poddisruptionbudgets":   "PodDisruptionBudget",
	"pdb":                    "PodDisruptionBudget",
	"pdbs":                   "PodDisruptionBudget",
	"services":               "Service",
	"svc":                    "Service",
	"replicasets":            "ReplicaSet",
	"rs":                     "ReplicaSet",
	"statefulsets":           "StatefulSet",
	"sts":                    "StatefulSet",
	"replicationcontrollers": "ReplicationController",
	"rc":                     "ReplicationController",
	"jobs":                   "Job",
	"daemonsets":             "DaemonSet",
	"ds":                     "DaemonSet",
	"storageclasses":         "StorageClass",
	"sc":                     "StorageClass",
	"persistentvolumes":      "PersistentVolume",
	"pv":                     "PersistentVolume",
	"persistentvolumeclaims": "PersistentVolumeClaim",
	"pvc":                    "PersistentVolumeClaim",
	"csinodes":               "CSINode",
	"csidrivers":             "CSIDriver",
	"csistoragecapacities":   "CSIStorageCapacity",
	"volumeattachments":      "VolumeAttachment",
	"deviceclasses":          "DeviceClass",
	"resourceslices":         "ResourceSlice",
	"resourceclaims":         "ResourceClaim",
}

func canonicalKind(kind string) (string, bool) {
	lower := strings.ToLower(kind)
	if canonical, ok := kindAliases[lower]; ok {
		return canonical, true
	}
	for name := range kinds {
		if strings.ToLower(name) == lower {
			return name, true
		}
	}
	return "", false
}

// ObjectKind is the ObjectKind of a kind as Kubernetes or kubectl spells it: "Pod", "pods", "po",
// "PodDisruptionBudget", "pdb", ...
func ObjectKind(kind string) (podfitv1.ObjectKind, error) {
	return objectKind(kind, "kind")
}

func objectKind(kind, field string) (podfitv1.ObjectKind, error) {
	canonical, ok := canonicalKind(kind)
	if !ok {
		names := make([]string, 0, len(kinds))
		for name := range kinds {
			names = append(names, name)
		}
		slices.Sort(names)
		return 0, invalidArgument(field, "%q is not a kind podfit holds (%s)", kind, strings.Join(names, ", "))
	}
	return kinds[canonical], nil
}

// Deletion is a delete inside an Apply or a Stream batch, applied in order with the upserts around it.
type Deletion struct {
	// Kind as Kubernetes or kubectl spells it ("Pod", "pods", "pdb", ...).
	Kind string
	// Empty for cluster-scoped kinds; empty for a namespaced kind means "default".
	Namespace string
	Name      string
	// When set, the delete is ignored as stale if the cache holds a newer version.
	ResourceVersion string
}

func (d Deletion) key(field string) (*podfitv1.ObjectKey, error) {
	kind, err := objectKind(d.Kind, field+".kind")
	if err != nil {
		return nil, err
	}
	return &podfitv1.ObjectKey{Kind: kind, Namespace: d.Namespace, Name: d.Name, ResourceVersion: d.ResourceVersion}, nil
}

// Cached refers to a pod already in the cache, wherever a pod is expected: the server decides for
// the cached pod without the caller sending it again.
func Cached(namespace, name string) *podfitv1.PodReference {
	return &podfitv1.PodReference{Source: &podfitv1.PodReference_Cached{
		Cached: &podfitv1.ObjectKey{Kind: podfitv1.ObjectKind_OBJECT_KIND_POD, Namespace: namespace, Name: name},
	}}
}

// ToClusterObject converts one object the way Apply does: a *podfitv1.ClusterObject as is; a typed
// message (*podfitv1.Pod, *podfitv1.Node, ...) or *podfitv1.KubernetesProtobuf in its field; []byte
// or json.RawMessage as Kubernetes JSON; and any other value (a k8s.io/api object, a map, an
// unstructured object) as its json.Marshal. The server converts Kubernetes JSON with the converter
// every client shares and reports a bad field at its path in the request.
//
// Objects from a typed Kubernetes client often have no kind (client-go leaves TypeMeta empty): then
// the Go type's name says it when it is one of podfit's kinds (corev1.Pod is a "Pod").
func ToClusterObject(object any) (*podfitv1.ClusterObject, error) {
	return toClusterObject(object, "", "object")
}

// ToPodReference converts a pod the way Schedule does: a *podfitv1.PodReference (e.g. from Cached)
// as is; a *podfitv1.Pod, a *podfitv1.KubernetesProtobuf or a pod's *podfitv1.ClusterObject (what
// Get returns) by value; anything else as Kubernetes JSON, as ToClusterObject (the kind may be left
// out).
func ToPodReference(pod any) (*podfitv1.PodReference, error) {
	return toPodReference(pod, "pod")
}

// toClusterObject: defaultKind fills in the kind of Kubernetes JSON that has none (Replace's kind, a
// node group's template); field locates a refusal.
func toClusterObject(object any, defaultKind, field string) (*podfitv1.ClusterObject, error) {
	switch o := object.(type) {
	case *podfitv1.ClusterObject:
		if o == nil {
			return nil, invalidArgument(field, "a nil *ClusterObject")
		}
		return o, nil
	case *podfitv1.Node:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_Node{Node: o}}, nil
	case *podfitv1.Pod:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_Pod{Pod: o}}, nil
	case *podfitv1.Namespace:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_Namespace{Namespace: o}}, nil
	case *podfitv1.PodDisruptionBudget:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_PodDisruptionBudget{PodDisruptionBudget: o}}, nil
	case *podfitv1.Service:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_Service{Service: o}}, nil
	case *podfitv1.ReplicaSet:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_ReplicaSet{ReplicaSet: o}}, nil
	case *podfitv1.StatefulSet:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_StatefulSet{StatefulSet: o}}, nil
	case *podfitv1.ReplicationController:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_ReplicationController{ReplicationController: o}}, nil
	case *podfitv1.Job:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_Job{Job: o}}, nil
	case *podfitv1.DaemonSet:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_DaemonSet{DaemonSet: o}}, nil
	case *podfitv1.KubernetesProtobuf:
		return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_KubernetesProtobuf{KubernetesProtobuf: o}}, nil
	}
	data, err := kubernetesJSON(object, defaultKind, field)
	if err != nil {
		return nil, err
	}
	return &podfitv1.ClusterObject{Object: &podfitv1.ClusterObject_KubernetesJson{KubernetesJson: data}}, nil
}

func toPodReference(pod any, field string) (*podfitv1.PodReference, error) {
	switch p := pod.(type) {
	case *podfitv1.PodReference:
		if p == nil {
			return nil, invalidArgument(field, "a nil *PodReference")
		}
		return p, nil
	case *podfitv1.Pod:
		return &podfitv1.PodReference{Source: &podfitv1.PodReference_Pod{Pod: p}}, nil
	case *podfitv1.KubernetesProtobuf:
		return &podfitv1.PodReference{Source: &podfitv1.PodReference_KubernetesProtobuf{KubernetesProtobuf: p.GetData()}}, nil
	case *podfitv1.ClusterObject: // e.g. what Get returned
		switch o := p.GetObject().(type) {
		case *podfitv1.ClusterObject_Pod:
			return &podfitv1.PodReference{Source: &podfitv1.PodReference_Pod{Pod: o.Pod}}, nil
		case *podfitv1.ClusterObject_KubernetesJson:
			return toPodReference(json.RawMessage(o.KubernetesJson), field)
		case *podfitv1.ClusterObject_KubernetesProtobuf:
			return toPodReference(o.KubernetesProtobuf, field)
		}
		return nil, invalidArgument(field, "the ClusterObject holds no pod")
	}
	data, err := kubernetesJSON(pod, "Pod", field)
	if err != nil {
		return nil, err
	}
	return &podfitv1.PodReference{Source: &podfitv1.PodReference_KubernetesJson{KubernetesJson: data}}, nil
}

// kubernetesJSON is the Kubernetes JSON of value, with a kind filled in when it has none: the Go
// type's name if it is a kind podfit holds, else defaultKind.
func kubernetesJSON(value any, defaultKind, field string) ([]byte, error) {
	var data []byte
	switch v := value.(type) {
	case nil:
		return nil, invalidArgument(field, "a Kubernetes object is needed, not nil")
	case string:
		return nil, invalidArgument(field, "a string is not a Kubernetes object: pass JSON text as json.RawMessage, a cached pod as podfit.Cached(namespace, name)")
	case json.RawMessage:
		data = v
	case []byte:
		data = v
	case Deletion, *Deletion:
		return nil, invalidArgument(field, "a Deletion is not an object: deletes go in Apply or Stream.Send")
	case proto.Message:
		return nil, invalidArgument(field, "a %s is not a Kubernetes object", v.ProtoReflect().Descriptor().FullName())
	default:
		encoded, err := json.Marshal(value)
		if err != nil {
			return nil, invalidArgument(field, "cannot encode %T as JSON: %v", value, err)
		}
		data = encoded
		if kind := typeKind(value); kind != "" {
			defaultKind = kind
		}
	}
	if defaultKind == "" {
		return data, nil // the server checks it, and reports a bad field at its path
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, invalidArgument(field, "not a Kubernetes object (a JSON object): %s", describe(value, data))
	}
	var kind string
	if raw, ok := fields["kind"]; ok {
		_ = json.Unmarshal(raw, &kind)
	}
	if kind != "" {
		return data, nil
	}
	fields["kind"], _ = json.Marshal(defaultKind)
	return json.Marshal(fields)
}

// typeKind is the kind a Go type's name says (corev1.Pod, *appsv1.ReplicaSet, ...), or "".
func typeKind(value any) string {
	t := reflect.TypeOf(value)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, ok := kinds[t.Name()]; ok && t.Kind() == reflect.Struct {
		return t.Name()
	}
	return ""
}

func describe(value any, data []byte) string {
	const limit = 60
	text := string(data)
	if len(text) > limit {
		text = text[:limit] + "..."
	}
	return fmt.Sprintf("%T %s", value, text)
}

// flatten spreads slices and arrays (but not []byte or json.RawMessage) into their items, so that
// Apply(ctx, nodes) works for nodes []corev1.Node as Apply(ctx, nodes...) would.
func flatten(objects []any) []any {
	var result []any
	for _, object := range objects {
		switch object.(type) {
		case []byte, json.RawMessage:
			result = append(result, object)
			continue
		}
		v := reflect.ValueOf(object)
		if v.Kind() == reflect.Slice || v.Kind() == reflect.Array {
			items := make([]any, v.Len())
			for i := range items {
				items[i] = v.Index(i).Interface()
			}
			result = append(result, flatten(items)...)
			continue
		}
		result = append(result, object)
	}
	return result
}
