// Command podfit-load asks a podfit server for decisions from many concurrent callers, each on a
// connection of its own, and reports decisions per second and how many placed their pod. A Go client
// costs a fraction of a millisecond of CPU per call, so on a small machine it leaves the cores to the
// server: this is how podfit's decision workers (podfit-server --workers) are measured against one
// process.
//
//	podfit-load -target 127.0.0.1:50051 -insecure -clients 8 -decisions 4000 [-assume]
//
// The cluster must be loaded already (podfit bench loads scheduler_perf's templates). Each pod asks
// for a CPU request of its own, so no two decisions share the server's memo.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	podfit "github.com/podfit/podfit/sdk/go"
	"github.com/podfit/podfit/sdk/go/podfitv1"
)

func pod(i int) *podfitv1.Pod {
	return &podfitv1.Pod{
		Metadata: &podfitv1.ObjectMeta{
			Name: fmt.Sprintf("load-%d", i), Namespace: "default", Uid: fmt.Sprintf("uid-load-%d", i),
			Labels: map[string]string{"color": "blue"},
		},
		Spec: &podfitv1.PodSpec{Containers: []*podfitv1.Container{{
			Name: "c", Image: "registry.k8s.io/pause:3.9",
			Resources: &podfitv1.ResourceRequirements{Requests: map[string]string{
				"cpu": fmt.Sprintf("%dm", 100+i%3000), "memory": fmt.Sprintf("%dMi", 500+i/3000),
			}},
		}}},
	}
}

func main() {
	target := flag.String("target", "127.0.0.1:50051", "podfit server address")
	clients := flag.Int("clients", 4, "concurrent callers, each on a connection of its own")
	decisions := flag.Int("decisions", 2000, "Schedule calls in all")
	assume := flag.Bool("assume", false, "reserve each pod (Schedule with assume)")
	plaintext := flag.Bool("insecure", false, "dial without TLS (a server on loopback)")
	caFile := flag.String("ca-file", "", "PEM CA that signed the server's certificate")
	flag.Parse()
	var dial []podfit.Option
	if *plaintext {
		dial = append(dial, podfit.WithInsecure())
	}
	if *caFile != "" {
		dial = append(dial, podfit.WithCAFile(*caFile))
	}
	ctx := context.Background()
	conns := make([]*podfit.Client, *clients)
	for k := range conns {
		c, err := podfit.Dial(ctx, *target, dial...)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer c.Close()
		if _, err := c.Stats(ctx); err != nil { // connected before the clock starts
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conns[k] = c
	}
	options := []podfit.CallOption{podfit.BasicView(), podfit.DisablePreemption()}
	if *assume {
		options = append(options, podfit.Assume())
	}
	var wg sync.WaitGroup
	var failed sync.Once
	var placed atomic.Int64 // decisions that selected a node (and, with -assume, reserved it)
	started := time.Now()
	for k := range conns {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for i := k; i < *decisions; i += *clients {
				answer, err := conns[k].Schedule(ctx, pod(i), options...)
				if err != nil {
					failed.Do(func() { fmt.Fprintln(os.Stderr, err); os.Exit(1) })
				}
				if answer.GetSelectedNode() != "" && (!*assume || answer.GetAssumedGeneration() > 0) {
					placed.Add(1)
				}
			}
		}(k)
	}
	wg.Wait()
	elapsed := time.Since(started).Seconds()
	fmt.Printf("clients=%d assume=%v decisions=%d placed=%d seconds=%.2f per_second=%.0f\n",
		*clients, *assume, *decisions, placed.Load(), elapsed, float64(*decisions)/elapsed)
}
