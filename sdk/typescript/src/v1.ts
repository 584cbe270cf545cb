// Every generated podfit.v1 message, enum and service (protos/podfit/v1), under one name.
export * from "./gen/podfit/v1/objects_pb.js";
export * from "./gen/podfit/v1/cluster_cache_pb.js";
export * from "./gen/podfit/v1/scheduler_pb.js";
export * from "./gen/podfit/v1/simulation_pb.js";
