// Package podfit is the Go client of podfit, a service that answers kube-scheduler-exact
// Filter/Score/Schedule/Preempt decisions, and what-if simulations, over an in-memory copy of a
// cluster.
//
// Feed the cache (Apply, Replace, Stream), then ask (Schedule, Filter, Score, ScheduleBatch, Preempt,
// Simulate, EstimateScaleUp, SimulateDrain):
//
//	client, err := podfit.Dial(ctx, "podfit.example:50051", podfit.WithToken(token))
//	...
//	_, err = client.Apply(ctx, nodes) // []corev1.Node, maps, JSON: Kubernetes objects as you hold them
//	decision, err := client.Schedule(ctx, pod, podfit.Assume())
//	fmt.Println(decision.GetSelectedNode())
//
// Objects and pods are taken as the caller already holds them: a k8s.io/api object (or any value
// that json.Marshals to a Kubernetes object) travels as its Kubernetes JSON, which the server
// converts; typed podfit.v1 messages travel as they are. The request and response messages are
// generated from protos/podfit/v1 into the podfitv1 package, and the generated stubs are on the
// Client for anything the wrapper leaves out.
//
// Every failed call returns an *Error with the gRPC code and the server's field violations.
package podfit
