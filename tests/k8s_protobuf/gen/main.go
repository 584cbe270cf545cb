// Command gen writes tests/k8s_protobuf/vectors.json: pods and nodes built with k8s.io/api, each with the
// bytes Kubernetes' own code gives for it (obj.Marshal(), and the "k8s\x00" envelope of Kubernetes'
// protobuf serializer) and its encoding/json rendering. tests/test_k8s_protobuf.py checks podfit's
// decoder and encoder against them.
//
// Regenerate (needs Go and the Go module proxy; from the repository root):
//
//	cd tests/k8s_protobuf/gen && go run . > ../vectors.json
//
// Every field of protos/podfit/k8s/v1/core.proto is set, with a non-default value, in at least one
// vector; vectors with modelledOnly=false also carry fields that podfit does not model.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
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
			QOSClass:           v1.PodQOSBurstable,
			Resize:             v1.PodResizeStatusInProgress,
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
			StartTime:         &zero,
			Conditions:        []v1.PodCondition{{}},
			ContainerStatuses: []v1.ContainerStatus{{Started: ptr(false), Resources: &v1.ResourceRequirements{}}},
			Resources:         &v1.ResourceRequirements{},
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

func build(name string, obj object, modelledOnly bool) vector {
	gvk := v1.SchemeGroupVersion.WithKind(kindOf(obj))
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := obj.Marshal()
	must(err)
	rendered, err := json.Marshal(obj)
	must(err)

	// The JSON must be what Go gives for the object decoded from the bytes, or the vector would test more
	// than the wire format carries.
	decoded := newOf(obj)
	must(decoded.Unmarshal(raw))
	decoded.GetObjectKind().SetGroupVersionKind(gvk)
	again, err := json.Marshal(decoded)
	must(err)
	if !bytes.Equal(again, rendered) {
		panic(fmt.Sprintf("%s: JSON changes through protobuf:\n%s\n%s", name, rendered, again))
	}

	fromJSON := newOf(obj)
	must(json.Unmarshal(rendered, fromJSON))
	rewritten, err := fromJSON.Marshal()
	must(err)

	scheme := runtime.NewScheme()
	must(v1.AddToScheme(scheme))
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

func kindOf(obj object) string {
	switch obj.(type) {
	case *v1.Pod:
		return "Pod"
	case *v1.Node:
		return "Node"
	}
	panic(fmt.Sprintf("unexpected %T", obj))
}

func newOf(obj object) object {
	switch obj.(type) {
	case *v1.Pod:
		return &v1.Pod{}
	case *v1.Node:
		return &v1.Node{}
	}
	panic(fmt.Sprintf("unexpected %T", obj))
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
	}
	out, err := json.MarshalIndent(vectors, "", "  ")
	must(err)
	_, err = os.Stdout.Write(append(out, '\n'))
	must(err)
}
