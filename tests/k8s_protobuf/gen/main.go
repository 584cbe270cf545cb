// Command gen writes tests/k8s_protobuf/vectors.json: objects of every kind podfit decodes from Kubernetes
// protobuf, built with k8s.io/api, each with the bytes Kubernetes' own code gives for it (obj.Marshal(),
// and the "k8s\x00" envelope of Kubernetes' protobuf serializer) and its encoding/json rendering.
// tests/test_k8s_protobuf.py checks podfit's decoder and encoder against them.
//
// Regenerate (needs Go and the Go module proxy; from the repository root):
//
//	cd tests/k8s_protobuf/gen && go run . > ../vectors.json
//
// Every field of the schema in protos/podfit/k8s/v1 is set, with a non-default value, in at least one
// vector, and every Go pointer also to its zero value; vectors with modelledOnly=false also carry fields
// that podfit does not model.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// vector is one entry of vectors.json.
type vector struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// The object's bytes as obj.Marshal() writes them.
	Protobuf string `json:"protobuf_b64"`
	// The same object in the envelope Kubernetes' protobuf serializer writes ("k8s\x00" + runtime.Unknown).
	Envelope string `json:"envelope_b64"`
	// The object as encoding/json renders it (with apiVersion and kind set).
	JSON json.RawMessage `json:"json"`
	// True when every field set is one podfit models: decoding then gives exactly the JSON.
	ModelledOnly bool `json:"modelledOnly"`
	// What Go's Marshal() writes for the object decoded from the JSON (which can differ from
	// protobuf_b64 where JSON loses something: invalid UTF-8, a pointer to a zero time).
	ProtobufFromJSON string `json:"json_protobuf_b64"`
}

type object interface {
	runtime.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

func ptr[T any](v T) *T { return &v }

func q(s string) resource.Quantity { return resource.MustParse(s) }

func at(year int, month time.Month, day, hour, minute, second, nanos int) metav1.Time {
	return metav1.NewTime(time.Date(year, month, day, hour, minute, second, nanos, time.UTC))
}

func selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels: map[string]string{"app": "web", "tier": "front"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "staging"}},
			{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
		},
	}
}

// fullPod sets every modelled spec and metadata field.
func fullPod() *v1.Pod {
	hostPathType := v1.HostPathDirectoryOrCreate
	always := v1.ContainerRestartPolicyAlways
	preempt := v1.PreemptLowerPriority
	honor, ignore := v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore
	deletion := at(2024, 5, 6, 7, 8, 9, 0)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:                       "web-7d9f-abcde",
			GenerateName:               "web-7d9f-",
			Namespace:                  "shop",
			SelfLink:                   "/api/v1/namespaces/shop/pods/web-7d9f-abcde",
			UID:                        "0b4f1c1e-1111-2222-3333-444455556666",
			ResourceVersion:            "123456",
			Generation:                 3,
			CreationTimestamp:          at(2024, 1, 2, 3, 4, 5, 678000000),
			DeletionTimestamp:          &deletion,
			DeletionGracePeriodSeconds: ptr(int64(30)),
			Labels:                     map[string]string{"app": "web", "pod-template-hash": "7d9f"},
			Annotations: map[string]string{
				"cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
				"note": "<html> & \"quotes\" \u2028",
			},
			OwnerReferences: []metav1.OwnerReference{
				{
					APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f", UID: "rs-uid",
					Controller: ptr(true), BlockOwnerDeletion: ptr(true),
				},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "cm-uid", Controller: ptr(false)},
			},
			Finalizers: []string{"example.com/guard"},
		},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/log", Type: &hostPathType}}},
				{Name: "host-untyped", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp"}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "tmpfs", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr(q("64Mi"))}}},
				{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0", ReadOnly: true}}},
				{Name: "scratch-claim", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"type": "scratch"}},
					Spec: v1.PersistentVolumeClaimSpec{
						AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
						StorageClassName: ptr("fast"),
						Resources: v1.VolumeResourceRequirements{
							Requests: v1.ResourceList{"storage": q("10Gi")},
							Limits:   v1.ResourceList{"storage": q("20Gi")},
						},
						VolumeMode: ptr(v1.PersistentVolumeFilesystem),
					},
				}}}},
				{Name: "gce", VolumeSource: v1.VolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "disk-1", FSType: "ext4", Partition: 1, ReadOnly: true}}},
				{Name: "ebs", VolumeSource: v1.VolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc", FSType: "xfs", Partition: 2, ReadOnly: true}}},
				{Name: "iscsi", VolumeSource: v1.VolumeSource{ISCSI: &v1.ISCSIVolumeSource{
					TargetPortal: "10.0.0.9:3260", IQN: "iqn.2001-04.com.example:storage", Lun: 3, ISCSIInterface: "default",
					FSType: "ext4", ReadOnly: true, Portals: []string{"10.0.0.10:3260", "10.0.0.11:3260"},
					DiscoveryCHAPAuth: true, SessionCHAPAuth: true,
				}}},
				{Name: "rbd", VolumeSource: v1.VolumeSource{RBD: &v1.RBDVolumeSource{
					CephMonitors: []string{"10.0.0.20:6789"}, RBDImage: "image-1", FSType: "ext4", RBDPool: "kube", RadosUser: "admin",
					Keyring: "/etc/ceph/keyring", ReadOnly: true,
				}}},
			},
			InitContainers: []v1.Container{
				{
					Name: "migrate", Image: "migrate:1",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("2"), "memory": q("1Gi")}},
				},
				{
					Name: "proxy", Image: "proxy:2", RestartPolicy: &always,
					Ports: []v1.ContainerPort{{Name: "admin", HostPort: 15000, ContainerPort: 15000, Protocol: v1.ProtocolTCP}},
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{"cpu": q("100m"), "memory": q("64Mi")},
						Limits:   v1.ResourceList{"memory": q("128Mi")},
					},
				},
			},
			Containers: []v1.Container{
				{
					Name:       "app",
					Image:      "registry.example.com/web:1.2.3",
					Command:    []string{"/bin/web"},
					Args:       []string{"--port", "8080"},
					WorkingDir: "/srv",
					Ports: []v1.ContainerPort{
						{Name: "http", HostPort: 80, ContainerPort: 8080, Protocol: v1.ProtocolTCP, HostIP: "10.0.0.1"},
						{ContainerPort: 9090},
						{Name: "dns", HostPort: 53, ContainerPort: 53, Protocol: v1.ProtocolUDP},
					},
					Resources: v1.ResourceRequirements{
						Requests: v1.ResourceList{
							"cpu": q("1500m"), "memory": q("1Gi"), "ephemeral-storage": q("2G"),
							"example.com/foo": q("3"), "hugepages-2Mi": q("20Mi"),
						},
						Limits: v1.ResourceList{"cpu": q("0.5"), "memory": q("1e3"), "example.com/foo": q("3")},
						Claims: []v1.ResourceClaim{{Name: "gpu", Request: "first"}, {Name: "fpga"}},
					},
					TerminationMessagePath:   "/dev/termination-log",
					TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
					ImagePullPolicy:          v1.PullIfNotPresent,
					Stdin:                    true,
					StdinOnce:                true,
					TTY:                      true,
					RestartPolicyRules:       []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers}},
					VolumeMounts: []v1.VolumeMount{
						{
							Name: "data", ReadOnly: true, MountPath: "/data", SubPath: "app", SubPathExpr: "$(POD)",
							MountPropagation:  ptr(v1.MountPropagationHostToContainer),
							RecursiveReadOnly: ptr(v1.RecursiveReadOnlyIfPossible),
							BindMountOptions:  []string{"nosuid"},
						},
					},
				},
				{Name: "bare"},
			},
			RestartPolicy:                 v1.RestartPolicyOnFailure,
			TerminationGracePeriodSeconds: ptr(int64(45)),
			ActiveDeadlineSeconds:         ptr(int64(3600)),
			DNSPolicy:                     v1.DNSClusterFirstWithHostNet,
			NodeSelector:                  map[string]string{"kubernetes.io/os": "linux", "disk": "ssd"},
			ServiceAccountName:            "web",
			DeprecatedServiceAccount:      "web",
			AutomountServiceAccountToken:  ptr(true),
			NodeName:                      "node-1",
			HostNetwork:                   true,
			HostPID:                       true,
			HostIPC:                       true,
			ShareProcessNamespace:         ptr(true),
			Hostname:                      "web-0",
			Subdomain:                     "web",
			Affinity: &v1.Affinity{
				NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{
						{
							MatchExpressions: []v1.NodeSelectorRequirement{
								{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}},
								{Key: "cores", Operator: v1.NodeSelectorOpGt, Values: []string{"4"}},
							},
							MatchFields: []v1.NodeSelectorRequirement{
								{Key: "metadata.name", Operator: v1.NodeSelectorOpNotIn, Values: []string{"node-9"}},
							},
						},
						{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "spot", Operator: v1.NodeSelectorOpDoesNotExist}}},
					}},
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
						{Weight: 30, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{
							{Key: "disk", Operator: v1.NodeSelectorOpExists},
						}}},
						{Weight: 1, Preference: v1.NodeSelectorTerm{}},
					},
				},
				PodAffinity: &v1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
						LabelSelector:     selector(),
						Namespaces:        []string{"shop", "cache"},
						TopologyKey:       "topology.kubernetes.io/zone",
						NamespaceSelector: &metav1.LabelSelector{},
						MatchLabelKeys:    []string{"pod-template-hash"},
						MismatchLabelKeys: []string{"tenant"},
					}},
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{
						Weight: 50,
						PodAffinityTerm: v1.PodAffinityTerm{
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}},
							TopologyKey:   "kubernetes.io/hostname",
						},
					}},
				},
				PodAntiAffinity: &v1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
						TopologyKey:   "kubernetes.io/hostname",
						NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
							{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}},
						}},
					}},
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{
						Weight: 100,
						PodAffinityTerm: v1.PodAffinityTerm{
							LabelSelector: selector(),
							TopologyKey:   "topology.kubernetes.io/zone",
							Namespaces:    []string{"shop"},
						},
					}},
				},
			},
			SchedulerName: "my-scheduler",
			Tolerations: []v1.Toleration{
				{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "web", Effect: v1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Operator: v1.TolerationOpExists},
			},
			PriorityClassName:  "high",
			Priority:           ptr(int32(1000)),
			RuntimeClassName:   ptr("gvisor"),
			EnableServiceLinks: ptr(true),
			PreemptionPolicy:   &preempt,
			Overhead:           v1.ResourceList{"cpu": q("250m"), "memory": q("120Mi")},
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{
				{
					MaxSkew: 2, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: v1.DoNotSchedule,
					LabelSelector: selector(), MinDomains: ptr(int32(3)),
					NodeAffinityPolicy: &ignore, NodeTaintsPolicy: &honor,
					MatchLabelKeys: []string{"pod-template-hash"},
				},
				{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: v1.ScheduleAnyway},
			},
			SetHostnameAsFQDN: ptr(true),
			OS:                &v1.PodOS{Name: v1.Linux},
			HostUsers:         ptr(true),
			SchedulingGates:   []v1.PodSchedulingGate{{Name: "example.com/quota"}, {Name: "example.com/approval"}},
			ResourceClaims: []v1.PodResourceClaim{
				{Name: "gpu", ResourceClaimName: ptr("gpu-claim")},
				{Name: "fpga", ResourceClaimTemplateName: ptr("fpga-template")},
			},
			Resources: &v1.ResourceRequirements{
				Requests: v1.ResourceList{"cpu": q("4"), "memory": q("8Gi")},
				Limits:   v1.ResourceList{"cpu": q("8")},
			},
			HostnameOverride: ptr("web-zero"),
		},
	}
}

// statusPod sets every modelled status field.
func statusPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "running", Namespace: "default", CreationTimestamp: at(2023, 12, 31, 23, 59, 59, 0)},
		Spec: v1.PodSpec{
			NodeName:   "node-2",
			Containers: []v1.Container{{Name: "app", Image: "app:1", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("1")}}}},
		},
		Status: v1.PodStatus{
			ObservedGeneration: 4,
			Phase:              v1.PodRunning,
			Conditions: []v1.PodCondition{
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: at(2024, 1, 1, 0, 0, 0, 0)},
				{
					Type: v1.PodReady, ObservedGeneration: 4, Status: v1.ConditionFalse,
					LastProbeTime: at(2024, 1, 1, 0, 1, 0, 0), LastTransitionTime: at(2024, 1, 1, 0, 2, 0, 0),
					Reason: "ContainersNotReady", Message: "containers with unready status: [app]",
				},
			},
			Message:           "being resized",
			Reason:            "Evicted",
			NominatedNodeName: "node-3",
			HostIP:            "10.0.0.2",
			HostIPs:           []v1.HostIP{{IP: "10.0.0.2"}, {IP: "fd00::2"}},
			PodIP:             "10.1.0.5",
			PodIPs:            []v1.PodIP{{IP: "10.1.0.5"}, {IP: "fd01::5"}},
			StartTime:         ptr(at(2024, 1, 1, 0, 0, 30, 0)),
			InitContainerStatuses: []v1.ContainerStatus{{
				Name: "init",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					ExitCode: 0, Signal: 9, Reason: "Completed", Message: "done",
					StartedAt: at(2024, 1, 1, 0, 0, 10, 0), FinishedAt: at(2024, 1, 1, 0, 0, 20, 0),
					ContainerID: "containerd://init",
				}},
				Ready: true, Image: "init:1", ImageID: "sha256:init",
			}},
			ContainerStatuses: []v1.ContainerStatus{
				{
					Name:                 "app",
					State:                v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at(2024, 1, 1, 0, 0, 40, 0)}},
					LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}},
					Ready:                false,
					RestartCount:         2,
					Image:                "app:1",
					ImageID:              "sha256:app",
					ContainerID:          "containerd://app",
					Started:              ptr(true),
					AllocatedResources:   v1.ResourceList{"cpu": q("1"), "memory": q("256Mi")},
					Resources: &v1.ResourceRequirements{
						Requests: v1.ResourceList{"cpu": q("1")},
						Limits:   v1.ResourceList{"cpu": q("2")},
					},
				},
				{
					Name:                 "waiting",
					State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}},
					LastTerminationState: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
					Started:              ptr(false),
				},
			},
			QOSClass: v1.PodQOSBurstable,
			Resize:   v1.PodResizeStatusInProgress,
			ResourceClaimStatuses: []v1.PodResourceClaimStatus{
				{Name: "gpu", ResourceClaimName: ptr("running-gpu-x7k2")},
				{Name: "not-needed"},
			},
			AllocatedResources: v1.ResourceList{"cpu": q("1"), "memory": q("256Mi")},
			Resources:          &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("1")}},
		},
	}
}

// zeroPod sets Go pointer fields to their zero values (present, so shown in JSON) and leaves lists nil.
func zeroPod() *v1.Pod {
	empty := v1.PreemptionPolicy("")
	zero := metav1.Time{}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:                       "zeroes",
			DeletionTimestamp:          &zero,
			DeletionGracePeriodSeconds: ptr(int64(0)),
			OwnerReferences:            []metav1.OwnerReference{{Controller: ptr(false), BlockOwnerDeletion: ptr(false)}},
		},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{
				{Name: "nothing"},
				{Name: "empty-host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Type: ptr(v1.HostPathType(""))}}},
				{Name: "zero-size", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr(q("0"))}}},
				{Name: "no-template", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
				{Name: "zero-template", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
					Spec: v1.PersistentVolumeClaimSpec{StorageClassName: ptr(""), VolumeMode: ptr(v1.PersistentVolumeMode(""))},
				}}}},
				{Name: "zero-sources", VolumeSource: v1.VolumeSource{
					GCEPersistentDisk:    &v1.GCEPersistentDiskVolumeSource{},
					AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{},
					ISCSI:                &v1.ISCSIVolumeSource{},
					RBD:                  &v1.RBDVolumeSource{},
				}},
			},
			InitContainers: []v1.Container{{
				Name:          "i",
				RestartPolicy: ptr(v1.ContainerRestartPolicy("")),
				VolumeMounts: []v1.VolumeMount{{
					MountPropagation:  ptr(v1.MountPropagationMode("")),
					RecursiveReadOnly: ptr(v1.RecursiveReadOnlyMode("")),
				}},
			}},
			TerminationGracePeriodSeconds: ptr(int64(0)),
			ActiveDeadlineSeconds:         ptr(int64(0)),
			AutomountServiceAccountToken:  ptr(false),
			ShareProcessNamespace:         ptr(false),
			Affinity: &v1.Affinity{
				NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{}},
				PodAffinity:  &v1.PodAffinity{},
				PodAntiAffinity: &v1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{}},
				},
			},
			Tolerations:               []v1.Toleration{{TolerationSeconds: ptr(int64(0))}},
			Priority:                  ptr(int32(0)),
			RuntimeClassName:          ptr(""),
			EnableServiceLinks:        ptr(false),
			PreemptionPolicy:          &empty,
			TopologySpreadConstraints: []v1.TopologySpreadConstraint{{MinDomains: ptr(int32(0)), NodeAffinityPolicy: ptr(v1.NodeInclusionPolicy("")), NodeTaintsPolicy: ptr(v1.NodeInclusionPolicy(""))}},
			SetHostnameAsFQDN:         ptr(false),
			OS:                        &v1.PodOS{},
			HostUsers:                 ptr(false),
			SchedulingGates:           []v1.PodSchedulingGate{{}},
			ResourceClaims:            []v1.PodResourceClaim{{ResourceClaimName: ptr(""), ResourceClaimTemplateName: ptr("")}},
			Resources:                 &v1.ResourceRequirements{},
			HostnameOverride:          ptr(""),
		},
		Status: v1.PodStatus{
			StartTime:             &zero,
			Conditions:            []v1.PodCondition{{}},
			ResourceClaimStatuses: []v1.PodResourceClaimStatus{{ResourceClaimName: ptr("")}},
			ContainerStatuses:     []v1.ContainerStatus{{Started: ptr(false), Resources: &v1.ResourceRequirements{}}},
			Resources:             &v1.ResourceRequirements{},
		},
	}
}

func minimalPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "minimal"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// invalidUTF8Pod has strings that are not UTF-8: Go keeps the bytes, its JSON writes U+FFFD per bad byte.
func invalidUTF8Pod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "bytes",
			Labels: map[string]string{"k\xff": "v\xe2\x82", "ok": "\xed\xa0\x80"},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c\xc0\x80", Image: "ünïcode"}}},
	}
}

// unmodelledPod carries fields the schema leaves out (decoding skips them).
func unmodelledPod() *v1.Pod {
	pod := minimalPod()
	pod.Name = "unmodelled"
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{}}`)}}}
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
	c.EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true}}
	c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 5}
	c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}}
	c.SecurityContext = &v1.SecurityContext{RunAsUser: ptr(int64(1000)), Privileged: ptr(false)}
	c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: v1.NotRequired}}
	c.Resources.Requests = v1.ResourceList{"cpu": q("10m")}
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr(int64(2000))}
	pod.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "pull"}}
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"me"}}}
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/ready"}}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	pod.Spec.Priority = ptr(int32(-5))
	pod.Status.Phase = v1.PodPending
	pod.Status.EphemeralContainerStatuses = []v1.ContainerStatus{{Name: "debug"}}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{
		Name:         "c",
		VolumeMounts: []v1.VolumeMountStatus{{Name: "cfg", MountPath: "/etc/cfg"}},
		User:         &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 1000}},
	}}
	return pod
}

func fullNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "node-1",
			UID:               "node-uid",
			ResourceVersion:   "99",
			CreationTimestamp: at(2022, 2, 3, 4, 5, 6, 0),
			Labels: map[string]string{
				"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "a", "node.kubernetes.io/instance-type": "m5.xlarge",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: v1.NodeSpec{
			PodCIDR:       "10.1.0.0/24",
			PodCIDRs:      []string{"10.1.0.0/24", "fd01::/64"},
			ProviderID:    "aws:///us-east-1a/i-0123456789",
			Unschedulable: true,
			Taints: []v1.Taint{
				{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule, TimeAdded: ptr(at(2024, 3, 4, 5, 6, 7, 0))},
				{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectPreferNoSchedule},
				{Key: "evict", Effect: v1.TaintEffectNoExecute},
			},
			DoNotUseExternalID: "i-0123456789",
		},
		Status: v1.NodeStatus{
			Capacity: v1.ResourceList{
				"cpu": q("4"), "memory": q("16Gi"), "pods": q("110"), "ephemeral-storage": q("100Gi"),
				"nvidia.com/gpu": q("1"), "hugepages-2Mi": q("0"),
			},
			Allocatable: v1.ResourceList{
				"cpu": q("3920m"), "memory": q("15.5Gi"), "pods": q("110"), "ephemeral-storage": q("92994794468"),
				"nvidia.com/gpu": q("1"), "hugepages-2Mi": q("0"),
			},
			Phase: v1.NodeRunning,
			Conditions: []v1.NodeCondition{
				{
					Type: v1.NodeReady, Status: v1.ConditionTrue,
					LastHeartbeatTime: at(2024, 6, 1, 0, 0, 0, 0), LastTransitionTime: at(2024, 5, 1, 0, 0, 0, 0),
					Reason: "KubeletReady", Message: "kubelet is posting ready status",
				},
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse},
			},
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: "10.0.0.1"},
				{Type: v1.NodeHostName, Address: "node-1"},
			},
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: 10250}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID: "m", SystemUUID: "s", BootID: "b", KernelVersion: "6.1.0", OSImage: "Debian",
				ContainerRuntimeVersion: "containerd://1.7.0", KubeletVersion: "v1.35.4", KubeProxyVersion: "v1.35.4",
				OperatingSystem: "linux", Architecture: "amd64",
			},
			Images: []v1.ContainerImage{
				{Names: []string{"registry.example.com/web@sha256:abc", "registry.example.com/web:1.2.3"}, SizeBytes: 123456789},
				{Names: []string{"busybox:latest"}, SizeBytes: 4_300_000},
				{Names: []string{"huge:1"}, SizeBytes: 9_000_000_000_000_000_000},
				{Names: []string{"unknown-size:1"}},
			},
			DeclaredFeatures: []string{"UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"},
		},
	}
}

func minimalNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
}

// zeroNode sets pointers and lists to zero values.
func zeroNode() *v1.Node {
	zero := metav1.Time{}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "zero-node"},
		Spec:       v1.NodeSpec{Taints: []v1.Taint{{TimeAdded: &zero}}},
		Status: v1.NodeStatus{
			Capacity:   v1.ResourceList{"cpu": q("0")},
			Conditions: []v1.NodeCondition{{}},
			Addresses:  []v1.NodeAddress{{}},
			Images:     []v1.ContainerImage{{}},
		},
	}
}

func unmodelledNode() *v1.Node {
	node := minimalNode()
	node.Name = "unmodelled-node"
	node.Spec.ConfigSource = &v1.NodeConfigSource{ConfigMap: &v1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cfg", KubeletConfigKey: "kubelet"}}
	node.Status.Allocatable = v1.ResourceList{"cpu": q("2"), "memory": q("4Gi"), "pods": q("10")}
	node.Status.NodeInfo.Swap = &v1.NodeSwapStatus{Capacity: ptr(int64(1 << 30))}
	node.Status.VolumesInUse = []v1.UniqueVolumeName{"kubernetes.io/csi/ebs^vol-1"}
	node.Status.VolumesAttached = []v1.AttachedVolume{{Name: "kubernetes.io/csi/ebs^vol-1", DevicePath: "/dev/xvdba"}}
	node.Status.RuntimeHandlers = []v1.NodeRuntimeHandler{{Name: "runc", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr(true)}}}
	node.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: ptr(true)}
	node.Status.DeclaredFeatures = []string{"example"}
	return node
}

func zone(values ...string) *v1.NodeSelector {
	return &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "topology.kubernetes.io/zone", Operator: v1.NodeSelectorOpIn, Values: values},
	}}}}
}

// fullPV sets every modelled field but the in-tree volume sources, which the next vectors set.
func fullPV() *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:              "pv-csi",
			UID:               "pv-uid",
			ResourceVersion:   "77",
			CreationTimestamp: at(2024, 2, 3, 4, 5, 6, 0),
			Labels:            map[string]string{"topology.kubernetes.io/zone": "a"},
			Annotations:       map[string]string{"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
			Finalizers:        []string{"kubernetes.io/pv-protection"},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity: v1.ResourceList{"storage": q("100Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123", ReadOnly: true, FSType: "ext4",
				VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1700000000-ebs"},
			}},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany},
			ClaimRef: &v1.ObjectReference{
				Kind: "PersistentVolumeClaim", Namespace: "shop", Name: "data-0", UID: "pvc-uid",
				APIVersion: "v1", ResourceVersion: "42", FieldPath: "spec",
			},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              "fast",
			MountOptions:                  []string{"noatime", "nodiratime"},
			VolumeMode:                    ptr(v1.PersistentVolumeBlock),
			NodeAffinity:                  &v1.VolumeNodeAffinity{Required: zone("a", "b")},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeFailed, Message: "recycler failed", Reason: "VolumeFailedRecycle"},
	}
}

func localPV() *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-local"},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{"storage": q("375Gi")},
			PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: "/mnt/disks/ssd0", FSType: ptr("xfs")}},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod},
			StorageClassName:       "local",
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}},
			}}}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumeAvailable},
	}
}

// inTreePV sets one in-tree volume source; the wire format would carry several, but Kubernetes allows one.
func inTreePV(name string, source v1.PersistentVolumeSource) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": "b"}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{"storage": q("8Gi")},
			PersistentVolumeSource: source,
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		},
	}
}

func zeroPV() *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-zero"},
		Spec: v1.PersistentVolumeSpec{
			Capacity: v1.ResourceList{"storage": q("0")},
			PersistentVolumeSource: v1.PersistentVolumeSource{
				Local: &v1.LocalVolumeSource{FSType: ptr("")},
				CSI:   &v1.CSIPersistentVolumeSource{},
			},
			ClaimRef:     &v1.ObjectReference{},
			VolumeMode:   ptr(v1.PersistentVolumeMode("")),
			NodeAffinity: &v1.VolumeNodeAffinity{},
		},
	}
}

func unmodelledPV() *v1.PersistentVolume {
	pv := inTreePV("pv-unmodelled", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports"}})
	pv.Spec.VolumeAttributesClassName = ptr("gold")
	pv.Spec.CSI = &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h", NodePublishSecretRef: &v1.SecretReference{Name: "s"}}
	pv.Status = v1.PersistentVolumeStatus{Phase: v1.VolumeReleased, LastPhaseTransitionTime: ptr(at(2024, 1, 1, 0, 0, 0, 0))}
	return pv
}

func fullPVC() *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "data-0",
			Namespace: "shop",
			Annotations: map[string]string{
				"volume.kubernetes.io/selected-node": "node-1", "pv.kubernetes.io/bind-completed": "yes",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid", Controller: ptr(true)}},
		},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod},
			Selector:    selector(),
			Resources: v1.VolumeResourceRequirements{
				Requests: v1.ResourceList{"storage": q("10Gi")},
				Limits:   v1.ResourceList{"storage": q("20Gi")},
			},
			VolumeName:       "pv-csi",
			StorageClassName: ptr("fast"),
			VolumeMode:       ptr(v1.PersistentVolumeBlock),
		},
		Status: v1.PersistentVolumeClaimStatus{
			Phase:       v1.ClaimBound,
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod},
			Capacity:    v1.ResourceList{"storage": q("10Gi")},
		},
	}
}

func zeroPVC() *v1.PersistentVolumeClaim {
	return &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-zero"},
		Spec: v1.PersistentVolumeClaimSpec{
			Selector:         &metav1.LabelSelector{},
			StorageClassName: ptr(""),
			VolumeMode:       ptr(v1.PersistentVolumeMode("")),
		},
	}
}

func unmodelledPVC() *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pvc-unmodelled", Namespace: "shop"}}
	pvc.Spec.DataSource = &v1.TypedLocalObjectReference{APIGroup: ptr("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	pvc.Spec.VolumeAttributesClassName = ptr("gold")
	pvc.Spec.Resources.Requests = v1.ResourceList{"storage": q("1Gi")}
	pvc.Status.Phase = v1.ClaimPending
	pvc.Status.Conditions = []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue}}
	pvc.Status.AllocatedResources = v1.ResourceList{"storage": q("1Gi")}
	return pvc
}

func fullStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "fast", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "ebs.csi.aws.com",
		Parameters:        map[string]string{"type": "gp3", "csi.storage.k8s.io/fstype": "ext4"},
		ReclaimPolicy:     ptr(v1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowedTopologies: []v1.TopologySelectorTerm{
			{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{
				{Key: "topology.kubernetes.io/zone", Values: []string{"a", "b"}},
				{Key: "node.kubernetes.io/instance-type", Values: []string{"m5.xlarge"}},
			}},
			{},
		},
	}
}

func zeroStorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "zero-class"},
		ReclaimPolicy:     ptr(v1.PersistentVolumeReclaimPolicy("")),
		VolumeBindingMode: ptr(storagev1.VolumeBindingMode("")),
		AllowedTopologies: []v1.TopologySelectorTerm{{MatchLabelExpressions: []v1.TopologySelectorLabelRequirement{{}}}},
	}
}

func unmodelledStorageClass() *storagev1.StorageClass {
	class := fullStorageClass()
	class.Name = "unmodelled-class"
	class.MountOptions = []string{"debug"}
	class.AllowVolumeExpansion = ptr(true)
	return class
}

func fullCSINode() *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "node-1",
			Annotations:     map[string]string{"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "node-uid"}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{
				Name: "ebs.csi.aws.com", NodeID: "i-0123456789", TopologyKeys: []string{"topology.ebs.csi.aws.com/zone"},
				Allocatable: &storagev1.VolumeNodeResources{Count: ptr(int32(25))},
			},
			{Name: "efs.csi.aws.com", NodeID: "i-0123456789"},
		}},
	}
}

func zeroCSINode() *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "zero-csinode"},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Allocatable: &storagev1.VolumeNodeResources{Count: ptr(int32(0))}},
			{Allocatable: &storagev1.VolumeNodeResources{}},
		}},
	}
}

func unmodelledCSINode() *storagev1.CSINode {
	node := fullCSINode()
	node.Name = "unmodelled-csinode"
	node.Status.StorageHealth = []storagev1.StorageHealth{{Name: "ebs.csi.aws.com"}}
	return node
}

func fullCSIDriver() *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "ebs.csi.aws.com"},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:                     ptr(true),
			PodInfoOnMount:                     ptr(true),
			VolumeLifecycleModes:               []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral},
			StorageCapacity:                    ptr(true),
			FSGroupPolicy:                      ptr(storagev1.FileFSGroupPolicy),
			RequiresRepublish:                  ptr(true),
			SELinuxMount:                       ptr(true),
			NodeAllocatableUpdatePeriodSeconds: ptr(int64(60)),
			PreventPodSchedulingIfMissing:      ptr(true),
		},
	}
}

func zeroCSIDriver() *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "zero.csi.example.com"},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:                     ptr(false),
			PodInfoOnMount:                     ptr(false),
			StorageCapacity:                    ptr(false),
			FSGroupPolicy:                      ptr(storagev1.FSGroupPolicy("")),
			RequiresRepublish:                  ptr(false),
			SELinuxMount:                       ptr(false),
			NodeAllocatableUpdatePeriodSeconds: ptr(int64(0)),
			PreventPodSchedulingIfMissing:      ptr(false),
		},
	}
}

func unmodelledCSIDriver() *storagev1.CSIDriver {
	driver := fullCSIDriver()
	driver.Name = "unmodelled.csi.example.com"
	driver.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: ptr(int64(3600))}}
	driver.Spec.ServiceAccountTokenInSecrets = ptr(true)
	return driver
}

func fullCSIStorageCapacity() *storagev1.CSIStorageCapacity {
	return &storagev1.CSIStorageCapacity{
		ObjectMeta:        metav1.ObjectMeta{Name: "csisc-abcde", Namespace: "kube-system", Labels: map[string]string{"csi.storage.k8s.io/drivername": "ebs.csi.aws.com"}},
		NodeTopology:      selector(),
		StorageClassName:  "fast",
		Capacity:          ptr(q("1Ti")),
		MaximumVolumeSize: ptr(q("16Ti")),
	}
}

func zeroCSIStorageCapacity() *storagev1.CSIStorageCapacity {
	return &storagev1.CSIStorageCapacity{
		ObjectMeta:        metav1.ObjectMeta{Name: "csisc-zero", Namespace: "kube-system"},
		NodeTopology:      &metav1.LabelSelector{},
		Capacity:          ptr(q("0")),
		MaximumVolumeSize: ptr(q("0")),
	}
}

func fullVolumeAttachment() *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-0123abcd", Finalizers: []string{"external-attacher/ebs-csi-aws-com"}},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com",
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr("pv-csi")},
			NodeName: "node-1",
		},
		Status: storagev1.VolumeAttachmentStatus{Attached: true},
	}
}

func zeroVolumeAttachment() *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-zero"},
		Spec:       storagev1.VolumeAttachmentSpec{Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr("")}},
	}
}

func unmodelledVolumeAttachment() *storagev1.VolumeAttachment {
	va := fullVolumeAttachment()
	va.Name = "va-unmodelled"
	va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-9"}},
	}}
	va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/xvdba"}
	va.Status.AttachError = &storagev1.VolumeError{Message: "timeout"}
	return va
}

// parameters is opaque driver configuration as Go clients write it (not compact; Go's JSON compacts it and
// escapes <, > and &).
func parameters(text string) runtime.RawExtension {
	return runtime.RawExtension{Raw: []byte(text)}
}

func fullDeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com", Labels: map[string]string{"vendor": "example"}},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{
				{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}},
				{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "a100"`}},
			},
			Config: []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver: "gpu.example.com",
					Parameters: parameters(`{"sharing": {"strategy": "TimeSlicing", "replicas": 4},
						"tags": ["a", "<b> & c"], "ratio": 0.5, "exclusive": true, "profile": null, "empty": {}, "none": []}`),
				},
			}}},
			ExtendedResourceName: ptr("example.com/gpu"),
		},
	}
}

func zeroDeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "zero-class"},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{}, {CEL: &resourcev1.CELDeviceSelector{}}},
			Config: []resourcev1.DeviceClassConfiguration{
				{},
				{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{}}},
				{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Parameters: parameters(`{}`)}}},
			},
			ExtendedResourceName: ptr(""),
		},
	}
}

func fullResourceSlice() *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu.example.com-x7k2", GenerateName: "node-1-gpu.example.com-"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourcev1.ResourcePool{Name: "node-1", Generation: 2, ResourceSliceCount: 3},
			NodeName: ptr("node-1"),
			Devices: []resourcev1.Device{
				{
					Name: "gpu-0",
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
						"model":                 {StringValue: ptr("a100")},
						"gpu.example.com/index": {IntValue: ptr(int64(7))},
						"driverVersion":         {VersionValue: ptr("1.2.3-rc.1")},
						"mig":                   {BoolValue: ptr(true)},
					},
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
						"memory": {Value: q("80Gi")},
						"cores":  {Value: q("108")},
					},
				},
				{Name: "gpu-1"},
			},
		},
	}
}

func selectorResourceSlice() *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "nic-zone-a"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:       "nic.example.com",
			Pool:         resourcev1.ResourcePool{Name: "zone-a", Generation: 1, ResourceSliceCount: 1},
			NodeSelector: zone("a"),
			Devices:      []resourcev1.Device{{Name: "nic-0"}},
		},
	}
}

func allNodesResourceSlice() *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "fabric"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "fabric.example.com",
			Pool:     resourcev1.ResourcePool{Name: "fabric", ResourceSliceCount: 1},
			AllNodes: ptr(true),
		},
	}
}

// featuresResourceSlice sets the fields of the DRA features podfit reads (taints) or holds and refuses
// (partitionable devices, binding conditions, consumable capacity).
func featuresResourceSlice() *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-2-gpu.example.com-mig"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:                 "gpu.example.com",
			Pool:                   resourcev1.ResourcePool{Name: "node-2", Generation: 1, ResourceSliceCount: 1},
			PerDeviceNodeSelection: ptr(true),
			SharedCounters: []resourcev1.CounterSet{{
				Name:     "gpu-0-counters",
				Counters: map[string]resourcev1.Counter{"memory": {Value: q("80Gi")}, "sm": {Value: q("108")}},
			}},
			Devices: []resourcev1.Device{
				{
					Name: "gpu-0-mig-1",
					Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
						"memory": {Value: q("40Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{
							Default:     ptr(q("10Gi")),
							ValidValues: []resource.Quantity{q("10Gi"), q("20Gi")},
							ValidRange:  &resourcev1.CapacityRequestPolicyRange{Min: ptr(q("1Gi")), Max: ptr(q("40Gi")), Step: ptr(q("1Gi"))},
						}},
					},
					ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
						CounterSet: "gpu-0-counters",
						Counters:   map[string]resourcev1.Counter{"memory": {Value: q("40Gi")}},
					}},
					NodeName: ptr("node-2"),
					Taints: []resourcev1.DeviceTaint{
						{Key: "example.com/unhealthy", Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule, TimeAdded: ptr(at(2024, 6, 1, 0, 0, 0, 0))},
						{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoExecute},
					},
					BindsToNode:              ptr(true),
					BindingConditions:        []string{"example.com/attached"},
					BindingFailureConditions: []string{"example.com/failed"},
					AllowMultipleAllocations: ptr(true),
				},
				{Name: "gpu-0-mig-2", NodeSelector: zone("a")},
				{Name: "gpu-0-mig-3", AllNodes: ptr(true)},
			},
		},
	}
}

func zeroResourceSlice() *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "zero-slice"},
		Spec: resourcev1.ResourceSliceSpec{
			NodeName:               ptr(""),
			NodeSelector:           &v1.NodeSelector{},
			AllNodes:               ptr(false),
			PerDeviceNodeSelection: ptr(false),
			SharedCounters:         []resourcev1.CounterSet{{}},
			Devices: []resourcev1.Device{{
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"zero": {IntValue: ptr(int64(0)), BoolValue: ptr(false), StringValue: ptr(""), VersionValue: ptr("")},
					"none": {},
				},
				Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
					"nothing": {},
					"policy":  {RequestPolicy: &resourcev1.CapacityRequestPolicy{ValidRange: &resourcev1.CapacityRequestPolicyRange{}}},
				},
				ConsumesCounters:         []resourcev1.DeviceCounterConsumption{{}},
				NodeName:                 ptr(""),
				NodeSelector:             &v1.NodeSelector{},
				AllNodes:                 ptr(false),
				Taints:                   []resourcev1.DeviceTaint{{}},
				BindsToNode:              ptr(false),
				AllowMultipleAllocations: ptr(false),
			}},
		},
	}
}

// invalidUTF8ResourceSlice has a map of messages keyed by bytes that are not UTF-8.
func invalidUTF8ResourceSlice() *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "bytes-slice"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourcev1.ResourcePool{Name: "p\xff", ResourceSliceCount: 1},
			AllNodes: ptr(true),
			Devices: []resourcev1.Device{{
				Name:       "d",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"k\xff": {StringValue: ptr("v\xe2\x82")}, "ok": {BoolValue: ptr(true)}},
				Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"m\xc0": {Value: q("1")}},
			}},
		},
	}
}

func unmodelledResourceSlice() *resourcev1.ResourceSlice {
	slice := fullResourceSlice()
	slice.Name = "unmodelled-slice"
	slice.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "gpu-0-counters", Counters: map[string]resourcev1.Counter{"memory": {Value: q("80Gi")}}}}
	device := &slice.Spec.Devices[0]
	device.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0-counters", Counters: map[string]resourcev1.Counter{"memory": {Value: q("40Gi")}}, CompatibilityGroups: []string{"a"}}}
	device.Taints = []resourcev1.DeviceTaint{{Key: "example.com/unhealthy", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	device.BindsToNode = ptr(true)
	device.Attributes["list"] = resourcev1.DeviceAttribute{IntValues: []int64{1, 2}}
	device.Capacity["memory"] = resourcev1.DeviceCapacity{Value: q("80Gi"), RequestPolicy: &resourcev1.CapacityRequestPolicy{Default: ptr(q("1Gi"))}}
	slice.Spec.PartitionTypeAttribute = ptr(resourcev1.FullyQualifiedName("example.com/type"))
	return slice
}

func fullResourceClaim() *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "web-0-gpu-x7k2",
			Namespace:       "shop",
			UID:             "claim-uid",
			ResourceVersion: "12",
			Annotations:     map[string]string{"resource.kubernetes.io/pod-claim-name": "gpu"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web-0", UID: "pod-uid", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "gpu.example.com",
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: `device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0`,
					}}},
					AllocationMode: resourcev1.DeviceAllocationModeExactCount,
					Count:          2,
					AdminAccess:    ptr(true),
					Tolerations: []resourcev1.DeviceToleration{
						{Key: "example.com/unhealthy", Operator: resourcev1.DeviceTolerationOpEqual, Value: "ecc", Effect: resourcev1.DeviceTaintEffectNoSchedule},
						{Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
					},
					Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": q("10Gi")}},
				}},
				{Name: "nic", FirstAvailable: []resourcev1.DeviceSubRequest{
					{
						Name: "fast", DeviceClassName: "nic.example.com",
						Selectors:      []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["nic.example.com"].speed >= 100`}}},
						AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
						Tolerations: []resourcev1.DeviceToleration{{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpExists}},
						Capacity:    &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"bandwidth": q("10G")}},
					},
					{Name: "any", DeviceClassName: "nic.example.com", AllocationMode: resourcev1.DeviceAllocationModeAll},
				}},
			},
			Constraints: []resourcev1.DeviceConstraint{
				{Requests: []string{"gpu", "nic"}, MatchAttribute: ptr(resourcev1.FullyQualifiedName("example.com/numa"))},
				{Requests: []string{"gpu"}, DistinctAttribute: ptr(resourcev1.FullyQualifiedName("example.com/bus"))},
			},
			Config: []resourcev1.DeviceClaimConfiguration{{
				Requests: []string{"gpu"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver: "gpu.example.com", Parameters: parameters(`{"mode":"exclusive","limits":[1,2.5,-3]}`),
				}},
			}},
		}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
					{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0", AdminAccess: ptr(true)},
					{Request: "nic/fast", Driver: "nic.example.com", Pool: "zone-a", Device: "nic-0",
						BindingConditions: []string{"example.com/attached"}, BindingFailureConditions: []string{"example.com/failed"}},
				}},
				NodeSelector: zone("a"),
			},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{
				{Resource: "pods", Name: "web-0", UID: "pod-uid"},
				{APIGroup: "example.com", Resource: "things", Name: "thing", UID: "thing-uid"},
			},
		},
	}
}

func zeroResourceClaim() *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "zero-claim"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{
				{Exactly: &resourcev1.ExactDeviceRequest{
					AdminAccess: ptr(false),
					Tolerations: []resourcev1.DeviceToleration{{TolerationSeconds: ptr(int64(0))}},
					Capacity:    &resourcev1.CapacityRequirements{},
				}},
				{FirstAvailable: []resourcev1.DeviceSubRequest{{Tolerations: []resourcev1.DeviceToleration{{}}, Capacity: &resourcev1.CapacityRequirements{}}}},
			},
			Constraints: []resourcev1.DeviceConstraint{{MatchAttribute: ptr(resourcev1.FullyQualifiedName("")), DistinctAttribute: ptr(resourcev1.FullyQualifiedName(""))}},
			Config:      []resourcev1.DeviceClaimConfiguration{{}},
		}},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{AdminAccess: ptr(false)}},
			}},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{}},
		},
	}
}

func unmodelledResourceClaim() *resourcev1.ResourceClaim {
	claim := fullResourceClaim()
	claim.Name = "unmodelled-claim"
	exactly := claim.Spec.Devices.Requests[0].Exactly
	exactly.Tolerations = []resourcev1.DeviceToleration{{Key: "example.com/unhealthy", Operator: resourcev1.DeviceTolerationOpExists}}
	exactly.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": q("10Gi")}}
	claim.Spec.Devices.Constraints[0].DistinctAttribute = ptr(resourcev1.FullyQualifiedName("example.com/bus"))
	claim.Status.Allocation.AllocationTimestamp = ptr(at(2024, 6, 1, 0, 0, 0, 0))
	claim.Status.Allocation.Devices.Results[0].ShareID = ptr(types.UID("share-1"))
	claim.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0", Data: ptr(parameters(`{"health":"ok"}`))}}
	return claim
}

// minimal is an object of the kind with only a name: Go's JSON shows its value structs all the same.
func fullNamespace() *v1.Namespace {
	return &v1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "web", "kubernetes.io/metadata.name": "shop"}, UID: "uid-ns-shop", ResourceVersion: "12"},
		Spec:       v1.NamespaceSpec{Finalizers: []v1.FinalizerName{v1.FinalizerKubernetes}},
		Status:     v1.NamespaceStatus{Phase: v1.NamespaceActive},
	}
}

func unmodelledNamespace() *v1.Namespace {
	ns := fullNamespace()
	ns.Name = "ns-unmodelled"
	ns.Status.Conditions = []v1.NamespaceCondition{{Type: v1.NamespaceDeletionContentFailure, Status: v1.ConditionFalse}}
	return ns
}

func fullService() *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-svc-web"},
		Spec: v1.ServiceSpec{
			Selector:                 map[string]string{"app": "web", "tier": "front"},
			ClusterIP:                "10.0.0.10",
			Type:                     v1.ServiceTypeLoadBalancer,
			SessionAffinity:          v1.ServiceAffinityClientIP,
			LoadBalancerIP:           "192.0.2.10",
			ExternalName:             "web.example.com",
			ExternalTrafficPolicy:    v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:      30123,
			PublishNotReadyAddresses: true,
		},
	}
}

func unmodelledService() *v1.Service {
	svc := fullService()
	svc.Name = "svc-unmodelled"
	svc.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), NodePort: 30080}}
	svc.Spec.ClusterIPs = []string{"10.0.0.10"}
	svc.Spec.IPFamilyPolicy = ptr(v1.IPFamilyPolicySingleStack)
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	return svc
}

func fullPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb", Namespace: "shop", UID: "uid-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr(intstr.FromInt32(2)),
			Selector:                   selector(),
			MaxUnavailable:             ptr(intstr.FromString("25%")),
			UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow),
		},
		Status: policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 3,
			DisruptedPods:      map[string]metav1.Time{"web-1": at(2026, time.November, 29, 8, 0, 0, 0)},
			DisruptionsAllowed: 1,
			CurrentHealthy:     4,
			DesiredHealthy:     3,
			ExpectedPods:       5,
		},
	}
}

func zeroPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb-zero", Namespace: "shop"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr(intstr.FromInt32(0)),
			Selector:                   &metav1.LabelSelector{},
			MaxUnavailable:             ptr(intstr.FromString("")),
			UnhealthyPodEvictionPolicy: ptr(policyv1.UnhealthyPodEvictionPolicyType("")),
		},
	}
}

func unmodelledPDB() *policyv1.PodDisruptionBudget {
	pdb := fullPDB()
	pdb.Name = "pdb-unmodelled"
	pdb.Status.Conditions = []metav1.Condition{{Type: "DisruptionAllowed", Status: metav1.ConditionTrue, Reason: "SufficientPods", LastTransitionTime: at(2026, time.November, 29, 8, 0, 0, 0)}}
	return pdb
}

func template(app string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: app, Image: "registry.example.com/" + app + ":1"}}},
	}
}

func owned(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "7"}
}

func fullReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: owned("web-5d8f"),
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr(int32(3)), MinReadySeconds: 5, Selector: selector(), Template: template("web")},
		Status:     appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 4},
	}
}

func zeroReplicaSet() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: owned("rs-zero"), Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{}}}
}

func unmodelledReplicaSet() *appsv1.ReplicaSet {
	rs := fullReplicaSet()
	rs.Name = "rs-unmodelled"
	rs.Status.TerminatingReplicas = ptr(int32(1))
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: v1.ConditionFalse}}
	return rs
}

func fullStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: owned("db"),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr(int32(3)),
			Selector:            selector(),
			Template:            template("db"),
			ServiceName:         "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			MinReadySeconds:     10,
		},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 1,
			CurrentRevision: "db-6b7", UpdateRevision: "db-7c8", AvailableReplicas: 3,
		},
	}
}

func zeroStatefulSet() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: owned("sts-zero"), Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(0))}}
}

func unmodelledStatefulSet() *appsv1.StatefulSet {
	sts := fullStatefulSet()
	sts.Name = "sts-unmodelled"
	sts.Spec.RevisionHistoryLimit = ptr(int32(5))
	sts.Spec.VolumeClaimTemplates = []v1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}
	sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(1))}
	sts.Status.CollisionCount = ptr(int32(2))
	return sts
}

func fullDaemonSet() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: owned("agent"),
		Spec: appsv1.DaemonSetSpec{
			Selector:        selector(),
			Template:        template("agent"),
			UpdateStrategy:  appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			MinReadySeconds: 3,
		},
		Status: appsv1.DaemonSetStatus{
			CurrentNumberScheduled: 5, NumberMisscheduled: 1, DesiredNumberScheduled: 5, NumberReady: 4,
			ObservedGeneration: 6, UpdatedNumberScheduled: 5, NumberAvailable: 4, NumberUnavailable: 1,
		},
	}
}

func unmodelledDaemonSet() *appsv1.DaemonSet {
	ds := fullDaemonSet()
	ds.Name = "ds-unmodelled"
	ds.Spec.RevisionHistoryLimit = ptr(int32(10))
	ds.Status.CollisionCount = ptr(int32(1))
	return ds
}

func fullReplicationController() *v1.ReplicationController {
	tmpl := template("legacy")
	return &v1.ReplicationController{
		ObjectMeta: owned("legacy"),
		Spec:       v1.ReplicationControllerSpec{Replicas: ptr(int32(2)), MinReadySeconds: 4, Selector: map[string]string{"app": "legacy"}, Template: &tmpl},
		Status:     v1.ReplicationControllerStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1, ObservedGeneration: 3},
	}
}

func zeroReplicationController() *v1.ReplicationController {
	return &v1.ReplicationController{ObjectMeta: owned("rc-zero"), Spec: v1.ReplicationControllerSpec{Replicas: ptr(int32(0))}}
}

func unmodelledReplicationController() *v1.ReplicationController {
	rc := fullReplicationController()
	rc.Name = "rc-unmodelled"
	rc.Status.Conditions = []v1.ReplicationControllerCondition{{Type: v1.ReplicationControllerReplicaFailure, Status: v1.ConditionFalse}}
	return rc
}

func fullJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: owned("migrate"),
		Spec:       batchv1.JobSpec{Selector: selector(), Template: template("migrate")},
		Status:     batchv1.JobStatus{Active: 1, Succeeded: 2, Failed: 1, CompletedIndexes: "0-1"},
	}
}

func unmodelledJob() *batchv1.Job {
	job := fullJob()
	job.Name = "job-unmodelled"
	job.Spec.Parallelism = ptr(int32(2))
	job.Spec.BackoffLimit = ptr(int32(6))
	job.Spec.ManualSelector = ptr(true)
	job.Status.StartTime = ptr(at(2026, time.November, 29, 8, 0, 0, 0))
	job.Status.Ready = ptr(int32(1))
	return job
}

func minimal[T object](obj T, name string) T {
	any(obj).(metav1.Object).SetName(name)
	return obj
}

var scheme = func() *runtime.Scheme {
	scheme := runtime.NewScheme()
	must(v1.AddToScheme(scheme))
	must(storagev1.AddToScheme(scheme))
	must(resourcev1.AddToScheme(scheme))
	must(policyv1.AddToScheme(scheme))
	must(appsv1.AddToScheme(scheme))
	must(batchv1.AddToScheme(scheme))
	return scheme
}()

func build(name string, obj object, modelledOnly bool) vector {
	gvks, _, err := scheme.ObjectKinds(obj)
	must(err)
	gvk := gvks[0]
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := obj.Marshal()
	must(err)
	rendered, err := json.Marshal(obj)
	must(err)

	// The JSON must be what Go gives for the object decoded from the bytes, or the vector would test more
	// than the wire format carries.
	decoded := newOf(gvk)
	must(decoded.Unmarshal(raw))
	decoded.GetObjectKind().SetGroupVersionKind(gvk)
	again, err := json.Marshal(decoded)
	must(err)
	if !bytes.Equal(again, rendered) {
		panic(fmt.Sprintf("%s: JSON changes through protobuf:\n%s\n%s", name, rendered, again))
	}

	fromJSON := newOf(gvk)
	must(json.Unmarshal(rendered, fromJSON))
	rewritten, err := fromJSON.Marshal()
	must(err)

	var envelope bytes.Buffer
	must(protobuf.NewSerializer(scheme, scheme).Encode(obj, &envelope))

	return vector{
		Name:             name,
		Kind:             gvk.Kind,
		Protobuf:         base64.StdEncoding.EncodeToString(raw),
		Envelope:         base64.StdEncoding.EncodeToString(envelope.Bytes()),
		JSON:             rendered,
		ModelledOnly:     modelledOnly,
		ProtobufFromJSON: base64.StdEncoding.EncodeToString(rewritten),
	}
}

func newOf(gvk schema.GroupVersionKind) object {
	obj, err := scheme.New(gvk)
	must(err)
	return obj.(object)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	vectors := []vector{
		build("pod-full-spec", fullPod(), true),
		build("pod-full-status", statusPod(), true),
		build("pod-zero-pointers", zeroPod(), true),
		build("pod-minimal", minimalPod(), true),
		build("pod-invalid-utf8", invalidUTF8Pod(), true),
		build("pod-unmodelled-fields", unmodelledPod(), false),
		build("node-full", fullNode(), true),
		build("node-minimal", minimalNode(), true),
		build("node-zero-values", zeroNode(), true),
		build("node-unmodelled-fields", unmodelledNode(), false),
		build("pv-full", fullPV(), true),
		build("pv-local", localPV(), true),
		build("pv-gce", inTreePV("pv-gce", v1.PersistentVolumeSource{GCEPersistentDisk: &v1.GCEPersistentDiskVolumeSource{PDName: "disk-1", FSType: "ext4", Partition: 1, ReadOnly: true}}), true),
		build("pv-aws", inTreePV("pv-aws", v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0abc", FSType: "xfs", Partition: 2, ReadOnly: true}}), true),
		build("pv-host-path", inTreePV("pv-host-path", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data", Type: ptr(v1.HostPathDirectory)}}), true),
		build("pv-zero-values", zeroPV(), true),
		build("pv-minimal", minimal(&v1.PersistentVolume{}, "pv-minimal"), true),
		build("pv-unmodelled-fields", unmodelledPV(), false),
		build("pvc-full", fullPVC(), true),
		build("pvc-zero-values", zeroPVC(), true),
		build("pvc-minimal", minimal(&v1.PersistentVolumeClaim{}, "pvc-minimal"), true),
		build("pvc-unmodelled-fields", unmodelledPVC(), false),
		build("storageclass-full", fullStorageClass(), true),
		build("storageclass-zero-values", zeroStorageClass(), true),
		build("storageclass-minimal", minimal(&storagev1.StorageClass{}, "storageclass-minimal"), true),
		build("storageclass-unmodelled-fields", unmodelledStorageClass(), false),
		build("csinode-full", fullCSINode(), true),
		build("csinode-zero-values", zeroCSINode(), true),
		build("csinode-minimal", minimal(&storagev1.CSINode{}, "csinode-minimal"), true),
		build("csinode-unmodelled-fields", unmodelledCSINode(), false),
		build("csidriver-full", fullCSIDriver(), true),
		build("csidriver-zero-values", zeroCSIDriver(), true),
		build("csidriver-minimal", minimal(&storagev1.CSIDriver{}, "csidriver-minimal"), true),
		build("csidriver-unmodelled-fields", unmodelledCSIDriver(), false),
		build("csistoragecapacity-full", fullCSIStorageCapacity(), true),
		build("csistoragecapacity-zero-values", zeroCSIStorageCapacity(), true),
		build("csistoragecapacity-minimal", minimal(&storagev1.CSIStorageCapacity{}, "csistoragecapacity-minimal"), true),
		build("volumeattachment-full", fullVolumeAttachment(), true),
		build("volumeattachment-zero-values", zeroVolumeAttachment(), true),
		build("volumeattachment-minimal", minimal(&storagev1.VolumeAttachment{}, "volumeattachment-minimal"), true),
		build("volumeattachment-unmodelled-fields", unmodelledVolumeAttachment(), false),
		build("deviceclass-full", fullDeviceClass(), true),
		build("deviceclass-zero-values", zeroDeviceClass(), true),
		build("deviceclass-minimal", minimal(&resourcev1.DeviceClass{}, "deviceclass-minimal"), true),
		build("resourceslice-full", fullResourceSlice(), true),
		build("resourceslice-node-selector", selectorResourceSlice(), true),
		build("resourceslice-all-nodes", allNodesResourceSlice(), true),
		build("resourceslice-dra-features", featuresResourceSlice(), true),
		build("resourceslice-zero-values", zeroResourceSlice(), true),
		build("resourceslice-invalid-utf8", invalidUTF8ResourceSlice(), true),
		build("resourceslice-minimal", minimal(&resourcev1.ResourceSlice{}, "resourceslice-minimal"), true),
		build("resourceslice-unmodelled-fields", unmodelledResourceSlice(), false),
		build("resourceclaim-full", fullResourceClaim(), true),
		build("resourceclaim-zero-values", zeroResourceClaim(), true),
		build("resourceclaim-minimal", minimal(&resourcev1.ResourceClaim{}, "resourceclaim-minimal"), true),
		build("resourceclaim-unmodelled-fields", unmodelledResourceClaim(), false),
		build("namespace-full", fullNamespace(), true),
		build("namespace-minimal", minimal(&v1.Namespace{}, "namespace-minimal"), true),
		build("namespace-unmodelled-fields", unmodelledNamespace(), false),
		build("service-full", fullService(), true),
		build("service-minimal", minimal(&v1.Service{}, "service-minimal"), true),
		build("service-unmodelled-fields", unmodelledService(), false),
		build("pdb-full", fullPDB(), true),
		build("pdb-zero-values", zeroPDB(), true),
		build("pdb-minimal", minimal(&policyv1.PodDisruptionBudget{}, "pdb-minimal"), true),
		build("pdb-unmodelled-fields", unmodelledPDB(), false),
		build("replicaset-full", fullReplicaSet(), true),
		build("replicaset-zero-values", zeroReplicaSet(), true),
		build("replicaset-minimal", minimal(&appsv1.ReplicaSet{}, "replicaset-minimal"), true),
		build("replicaset-unmodelled-fields", unmodelledReplicaSet(), false),
		build("statefulset-full", fullStatefulSet(), true),
		build("statefulset-zero-values", zeroStatefulSet(), true),
		build("statefulset-minimal", minimal(&appsv1.StatefulSet{}, "statefulset-minimal"), true),
		build("statefulset-unmodelled-fields", unmodelledStatefulSet(), false),
		build("daemonset-full", fullDaemonSet(), true),
		build("daemonset-minimal", minimal(&appsv1.DaemonSet{}, "daemonset-minimal"), true),
		build("daemonset-unmodelled-fields", unmodelledDaemonSet(), false),
		build("replicationcontroller-full", fullReplicationController(), true),
		build("replicationcontroller-zero-values", zeroReplicationController(), true),
		build("replicationcontroller-minimal", minimal(&v1.ReplicationController{}, "replicationcontroller-minimal"), true),
		build("replicationcontroller-unmodelled-fields", unmodelledReplicationController(), false),
		build("job-full", fullJob(), true),
		build("job-minimal", minimal(&batchv1.Job{}, "job-minimal"), true),
		build("job-unmodelled-fields", unmodelledJob(), false),
	}
	out, err := json.MarshalIndent(vectors, "", "  ")
	must(err)
	_, err = os.Stdout.Write(append(out, '\n'))
	must(err)
}
