package podfit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"testing"

	"google.golang.org/grpc/codes"

	podfit "github.com/podfit/podfit/sdk/go"
)

// podfitAddress is where the examples find podfit-server; TestExamples points it at a test server.
var podfitAddress = "localhost:50051"

// Apply a node, then schedule a pod and reserve it there. Objects go as Kubernetes JSON: a k8s.io/api
// corev1.Node or corev1.Pod works the same, since the SDK json.Marshals whatever it does not know.
func Example() {
	ctx := context.Background()
	client, err := podfit.Dial(ctx, podfitAddress, podfit.WithInsecure())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	node := json.RawMessage(`{"kind": "Node", "metadata": {"name": "node-1"},
		"status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}`)
	if _, err := client.Apply(ctx, node); err != nil {
		log.Fatal(err)
	}

	pod := map[string]any{
		"kind":     "Pod",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec": map[string]any{"containers": []any{map[string]any{
			"name":      "web",
			"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
		}}},
	}
	decision, err := client.Schedule(ctx, pod, podfit.Assume())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("selected:", decision.GetSelectedNode())
	// Prints:
	// selected: node-1
}

// A bad input fails the call with an *Error that says where: the gRPC code and the path of each
// invalid field in the request.
func ExampleError() {
	ctx := context.Background()
	client, err := podfit.Dial(ctx, podfitAddress, podfit.WithInsecure())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	_, err = client.Apply(ctx, json.RawMessage(`{"kind": "Node", "metadata": {"name": "n"},
		"status": {"allocatable": {"cpu": "lots"}}}`))

	var perr *podfit.Error
	if errors.As(err, &perr) && perr.Code == codes.InvalidArgument {
		for _, violation := range perr.FieldViolations {
			fmt.Println(perr.Code, violation.Field)
		}
	}
	// Prints:
	// InvalidArgument updates[0].upsert.node.status.allocatable.cpu
}

// Feed changes over one Stream, as an informer's event handler would, and read the acknowledgements
// in order. A batch the server finds invalid is refused in band; the stream goes on.
func ExampleClient_Stream() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // abandons the stream on an early return
	client, err := podfit.Dial(ctx, podfitAddress, podfit.WithInsecure())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	stream, err := client.Stream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	batches := [][]any{
		{json.RawMessage(`{"kind": "Namespace", "metadata": {"name": "shop"}}`)},
		{json.RawMessage(`{"kind": "Pod", "metadata": {}}`)}, // no name
		{podfit.Deletion{Kind: "Namespace", Name: "shop"}},
	}
	for _, batch := range batches {
		if _, err := stream.Send(batch...); err != nil {
			log.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		log.Fatal(err)
	}
	for {
		ack, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		if ack.GetError() != "" {
			fmt.Printf("batch %d refused at %s\n", ack.GetSequence(), ack.GetErrorField())
		} else {
			fmt.Printf("batch %d applied %d\n", ack.GetSequence(), ack.GetAppliedCount())
		}
	}
	// Prints:
	// batch 1 applied 1
	// batch 2 refused at updates[0].upsert.pod.metadata.name
	// batch 3 applied 1
}

// TestExamples runs the examples against a real server (go test only compiles examples without an
// Output comment, and theirs needs a server) and checks what they print.
func TestExamples(t *testing.T) {
	podfitAddress = startServer(t, nil).target
	for _, tc := range []struct {
		name    string
		example func()
		want    string
	}{
		{"Example", Example, "selected: node-1\n"},
		{"ExampleError", ExampleError, "InvalidArgument updates[0].upsert.node.status.allocatable.cpu\n"},
		{"ExampleClient_Stream", ExampleClient_Stream,
			"batch 1 applied 1\nbatch 2 refused at updates[0].upsert.pod.metadata.name\nbatch 3 applied 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := captureStdout(t, tc.example); got != tc.want {
				t.Errorf("%s printed %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

// captureStdout runs f with os.Stdout going to a pipe. TestExamples is not parallel, so nothing else
// prints meanwhile.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	reader, writer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = writer
	defer func() { os.Stdout = stdout }()
	var output bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&output, reader)
		close(done)
	}()
	f()
	writer.Close()
	<-done
	return output.String()
}
