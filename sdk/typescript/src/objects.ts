// Kubernetes objects in, podfit.v1 messages out. A plain JS object ({kind: "Pod", metadata, spec, ...},
// as a Kubernetes client or a YAML parser hands it over) travels as its Kubernetes JSON
// (ClusterObject.kubernetes_json / PodReference.kubernetes_json): the server converts it with the same
// converter as every other client, and reports a bad field at its path in the request.
import type { Message, MessageInitShape } from "@bufbuild/protobuf";
import { create, isMessage } from "@bufbuild/protobuf";
import type { ClusterObject, ObjectKey } from "./gen/podfit/v1/cluster_cache_pb.js";
import { ClusterObjectSchema, ObjectKeySchema, ObjectKind } from "./gen/podfit/v1/cluster_cache_pb.js";
import type { PodReference } from "./gen/podfit/v1/scheduler_pb.js";
import { PodReferenceSchema } from "./gen/podfit/v1/scheduler_pb.js";
import { PodSchema } from "./gen/podfit/v1/objects_pb.js";
import { PodfitError } from "./errors.js";

/** A Kubernetes object as plain data: what `JSON.parse` or a YAML parser gives for a manifest. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** A cluster object: plain Kubernetes data, a typed podfit.v1 message (Node, Pod, ...) or a ClusterObject. */
export type ObjectInput = KubeObject | ClusterObject | Message;

/**
 * The pod a decision is about: plain Kubernetes data (kind may be left out), a podfit.v1 Pod, a
 * PodReference, `cached(namespace, name)` or the string "namespace/name" of a pod in the cache.
 */
export type PodInput = KubeObject | Message | string;

/** An object's identity, e.g. for deletes: kind as Kubernetes spells it ("Pod", "pods", "pdb", ...). */
export interface ObjectKeyInput {
  kind: string | ObjectKind;
  name: string;
  /** Empty for cluster-scoped kinds; empty for a namespaced kind means "default". */
  namespace?: string;
  /** When set, a delete is ignored as stale if the cache holds a newer version. */
  resourceVersion?: string;
}

// Kubernetes kind -> (ClusterObject oneof case, ObjectKind).
const KINDS = {
  Node: ["node", ObjectKind.NODE],
  Pod: ["pod", ObjectKind.POD],
  Namespace: ["namespace", ObjectKind.NAMESPACE],
  PodDisruptionBudget: ["podDisruptionBudget", ObjectKind.POD_DISRUPTION_BUDGET],
  Service: ["service", ObjectKind.SERVICE],
  ReplicaSet: ["replicaSet", ObjectKind.REPLICA_SET],
  StatefulSet: ["statefulSet", ObjectKind.STATEFUL_SET],
  ReplicationController: ["replicationController", ObjectKind.REPLICATION_CONTROLLER],
  Job: ["job", ObjectKind.JOB],
  DaemonSet: ["daemonSet", ObjectKind.DAEMON_SET],
  StorageClass: ["storageClass", ObjectKind.STORAGE_CLASS],
  PersistentVolume: ["persistentVolume", ObjectKind.PERSISTENT_VOLUME],
  PersistentVolumeClaim: ["persistentVolumeClaim", ObjectKind.PERSISTENT_VOLUME_CLAIM],
  CSINode: ["csiNode", ObjectKind.CSI_NODE],
  CSIDriver: ["csiDriver", ObjectKind.CSI_DRIVER],
  CSIStorageCapacity: ["csiStorageCapacity", ObjectKind.CSI_STORAGE_CAPACITY],
  VolumeAttachment: ["volumeAttachment", ObjectKind.VOLUME_ATTACHMENT],
  DeviceClass: ["deviceClass", ObjectKind.DEVICE_CLASS],
  ResourceSlice: ["resourceSlice", ObjectKind.RESOURCE_SLICE],
  ResourceClaim: ["resourceClaim", ObjectKind.RESOURCE_CLAIM],
} as const;
type Kind = keyof typeof KINDS;

// kubectl's spellings, as the Python SDK and the CLI accept them.
const ALIASES: Record<string, Kind> = {
  ...Object.fromEntries(Object.keys(KINDS).map((kind) => [kind.toLowerCase(), kind as Kind])),
  nodes: "Node",
  no: "Node",
  pods: "Pod",
  po: "Pod",
  namespaces: "Namespace",
  ns: "Namespace",
  poddisruptionbudgets: "PodDisruptionBudget",
  pdb: "PodDisruptionBudget",
  pdbs: "PodDisruptionBudget",
  services: "Service",
  svc: "Service",
  replicasets: "ReplicaSet",
  rs: "ReplicaSet",
  statefulsets: "StatefulSet",
  sts: "StatefulSet",
  replicationcontrollers: "ReplicationController",
  rc: "ReplicationController",
  jobs: "Job",
  daemonsets: "DaemonSet",
  ds: "DaemonSet",
  storageclasses: "StorageClass",
  sc: "StorageClass",
  persistentvolumes: "PersistentVolume",
  pv: "PersistentVolume",
  persistentvolumeclaims: "PersistentVolumeClaim",
  pvc: "PersistentVolumeClaim",
  csinodes: "CSINode",
  csidrivers: "CSIDriver",
  csistoragecapacities: "CSIStorageCapacity",
  volumeattachments: "VolumeAttachment",
  deviceclasses: "DeviceClass",
  resourceslices: "ResourceSlice",
  resourceclaims: "ResourceClaim",
};

const encoder = new TextEncoder();

function canonicalKind(kind: string, field: string): Kind {
  const canonical = ALIASES[kind.toLowerCase()];
  if (canonical === undefined) {
    throw PodfitError.invalidArgument(field, `${JSON.stringify(kind)} is not a kind podfit holds (${Object.keys(KINDS).join(", ")})`);
  }
  return canonical;
}

/** The ObjectKind of a kind name ("Pod", "pods", "po", ...). */
export function objectKind(kind: string | ObjectKind, field = "kind"): ObjectKind {
  return typeof kind === "number" ? kind : KINDS[canonicalKind(kind, field)][1];
}

export function objectKey(key: ObjectKeyInput, field = "key"): ObjectKey {
  return create(ObjectKeySchema, {
    kind: objectKind(key.kind, `${field}.kind`),
    name: key.name,
    namespace: key.namespace ?? "",
    resourceVersion: key.resourceVersion ?? "",
  });
}

/** A pod of the cache, by name: pass it wherever a pod is expected. */
export function cached(namespace: string, name: string): PodReference {
  return create(PodReferenceSchema, {
    source: { case: "cached", value: { kind: ObjectKind.POD, namespace, name } },
  });
}

function isPlainObject(value: unknown): value is KubeObject {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !("$typeName" in value);
}

function json(value: KubeObject): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/** Plain objects and `kind: List` (or FooList) with items flattened; anything else passes through. */
export function flatten(objects: ObjectInput | readonly ObjectInput[]): ObjectInput[] {
  const items: readonly unknown[] = Array.isArray(objects) ? objects : [objects];
  const result: ObjectInput[] = [];
  for (const item of items) {
    if (isPlainObject(item) && String(item.kind ?? "").endsWith("List") && Array.isArray(item["items"])) {
      result.push(...flatten(item["items"] as ObjectInput[]));
    } else {
      result.push(item as ObjectInput);
    }
  }
  return result;
}

/** One object as a ClusterObject; `kind` fills in for plain objects without one (e.g. bare nodes). */
export function toClusterObject(input: ObjectInput, field: string, kind?: string): ClusterObject {
  if (isPlainObject(input)) {
    const withKind = input.kind || kind === undefined ? input : { ...input, kind: canonicalKind(kind, "kind") };
    return create(ClusterObjectSchema, { object: { case: "kubernetesJson", value: json(withKind) } });
  }
  if (isMessage(input, ClusterObjectSchema)) {
    return input;
  }
  if (typeof input === "object" && input !== null && "$typeName" in input) {
    const typeName = String(input.$typeName);
    const name = typeName.startsWith("podfit.v1.") ? typeName.slice("podfit.v1.".length) : "";
    if (name in KINDS) {
      const [fieldCase] = KINDS[name as Kind];
      return create(ClusterObjectSchema, {
        object: { case: fieldCase, value: input },
      } as MessageInitShape<typeof ClusterObjectSchema>);
    }
    throw PodfitError.invalidArgument(field, `${typeName} is not a cluster object`);
  }
  throw PodfitError.invalidArgument(field, `a cluster object must be an object, not ${describe(input)}`);
}

/** The PodReference of a pod given by value, by reference ("namespace/name") or as a message. */
export function toPodReference(input: PodInput, field: string): PodReference {
  if (typeof input === "string") {
    const slash = input.lastIndexOf("/");
    return cached(slash < 0 ? "" : input.slice(0, slash), input.slice(slash + 1));
  }
  if (isPlainObject(input)) {
    return create(PodReferenceSchema, {
      source: { case: "kubernetesJson", value: json(input.kind ? input : { ...input, kind: "Pod" }) },
    });
  }
  if (isMessage(input, PodReferenceSchema)) {
    return input;
  }
  if (isMessage(input, PodSchema)) {
    return create(PodReferenceSchema, { source: { case: "pod", value: input } });
  }
  throw PodfitError.invalidArgument(field, `a pod must be a Kubernetes object, a Pod, cached(namespace, name) or "namespace/name", not ${describe(input)}`);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "object" && "$typeName" in value) return String(value.$typeName);
  return Array.isArray(value) ? "an array" : typeof value;
}

/** The typed objects a ClusterObject can hold (Get and List answer with these). */
export type TypedObject = Exclude<ClusterObject["object"]["value"], Uint8Array | { $typeName: "podfit.v1.KubernetesProtobuf" } | undefined>;

/** The typed message (Node, Pod, ...) inside a ClusterObject the server returned; undefined for raw forms. */
export function unwrap(object: ClusterObject | undefined): TypedObject | undefined {
  const value = object?.object.value;
  if (value === undefined || value instanceof Uint8Array || value.$typeName === "podfit.v1.KubernetesProtobuf") {
    return undefined;
  }
  return value;
}
