package podfit

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// Client calls podfit's three services. Its methods take Kubernetes objects as the caller already
// holds them (see ToClusterObject) and return the generated response messages; every failed call
// returns an *Error. A Client is safe for concurrent use; Close it when done.
type Client struct {
	conn *grpc.ClientConn

	// The generated stubs, for requests built by hand and RPCs the wrapper leaves out
	// (Scheduler.ScheduleStream). They carry the Dial options (token, TLS), but their errors are
	// plain gRPC status errors: pass them through AsError to get an *Error.
	Cache      podfitv1.ClusterCacheClient
	Scheduler  podfitv1.SchedulerClient
	Simulation podfitv1.SimulationClient
}

// Dial makes a Client of the podfit server at target ("host:port", or any gRPC target such as
// "dns:///podfit.example:50051"). It uses TLS verified against the system's roots unless WithInsecure
// is given; see the With... options for private CAs, mTLS and bearer tokens.
//
// Dial checks the options and returns at once: like grpc.NewClient it does not wait for the network,
// so an unreachable server shows up as Unavailable on the first call. ctx is checked before anything
// is set up; a done ctx returns its error.
func Dial(ctx context.Context, target string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	config := &dialConfig{}
	for _, opt := range opts {
		if opt != nil {
			opt(config)
		}
	}
	dialOptions, err := config.dialOptions()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, dialOptions...)
	if err != nil {
		return nil, fmt.Errorf("podfit: dial %s: %w", target, err)
	}
	return &Client{
		conn:       conn,
		Cache:      podfitv1.NewClusterCacheClient(conn),
		Scheduler:  podfitv1.NewSchedulerClient(conn),
		Simulation: podfitv1.NewSimulationClient(conn),
	}, nil
}

// Close closes the connection; calls in flight and open streams fail with Canceled.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Conn is the underlying connection, e.g. for the standard gRPC health service
// (healthpb.NewHealthClient(client.Conn())), which the server serves without a token.
func (c *Client) Conn() *grpc.ClientConn {
	return c.conn
}

// AsError converts an error of the generated stubs (Cache, Scheduler, Simulation) into an *Error,
// as the wrapper methods return it. nil and io.EOF stay as they are.
func AsError(ctx context.Context, err error) error {
	return wrapError(ctx, err)
}

func call[Req, Resp any](ctx context.Context, method func(context.Context, Req, ...grpc.CallOption) (Resp, error), request Req) (Resp, error) {
	response, err := method(ctx, request)
	if err != nil {
		var zero Resp
		return zero, wrapError(ctx, err)
	}
	return response, nil
}

// ClusterCache -----------------------------------------------------------------------------------

// Apply upserts objects atomically and in order: either all are valid and applied, or none is. An
// object is anything ToClusterObject takes; a Deletion deletes in the same batch, and a
// *podfitv1.Update goes as is. Slices are spread, so Apply(ctx, podList.Items) works.
func (c *Client) Apply(ctx context.Context, objects ...any) (*podfitv1.ApplyResponse, error) {
	updates, err := updatesOf(objects, "updates")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Cache.Apply, &podfitv1.ApplyRequest{Updates: updates})
}

// Delete deletes one object (namespace empty for cluster-scoped kinds); deleting an object the cache
// does not hold is not an error (its outcome is UNCHANGED).
func (c *Client) Delete(ctx context.Context, kind, namespace, name string) (*podfitv1.ApplyResponse, error) {
	return c.Apply(ctx, Deletion{Kind: kind, Namespace: namespace, Name: name})
}

// Replace makes objects exactly the objects of kind, like an informer's relist: the others of the
// kind are deleted. Kubernetes JSON without a kind takes this one.
func (c *Client) Replace(ctx context.Context, kind string, objects ...any) (*podfitv1.ReplaceResponse, error) {
	objectKind, err := objectKind(kind, "kind")
	if err != nil {
		return nil, err
	}
	canonical, _ := canonicalKind(kind)
	request := &podfitv1.ReplaceRequest{Kind: objectKind}
	for i, object := range flatten(objects) {
		converted, err := toClusterObject(object, canonical, fmt.Sprintf("objects[%d]", i))
		if err != nil {
			return nil, err
		}
		request.Objects = append(request.Objects, converted)
	}
	return call(ctx, c.Cache.Replace, request)
}

// Get returns one cached object; NotFound when the cache does not hold it.
func (c *Client) Get(ctx context.Context, kind, namespace, name string) (*podfitv1.GetResponse, error) {
	key, err := Deletion{Kind: kind, Namespace: namespace, Name: name}.key("key")
	if err != nil {
		return nil, err
	}
	return call(ctx, c.Cache.Get, &podfitv1.GetRequest{Key: key})
}

// List returns the cached objects of kind; InNamespace, LabelSelector, FieldSelector, PendingPods and
// BoundPods narrow it. The server splits a big answer into pages; List follows them and returns every object,
// unless Limit or ContinueFrom asks for one page (whose ContinueToken is empty on the last).
func (c *Client) List(ctx context.Context, kind string, opts ...CallOption) (*podfitv1.ListResponse, error) {
	config, err := newCallConfig(
		"List", opts, optNamespace|optLabelSelector|optFieldSelector|optPodFilter|optLimit|optContinue,
	)
	if err != nil {
		return nil, err
	}
	objectKind, err := objectKind(kind, "kind")
	if err != nil {
		return nil, err
	}
	request := &podfitv1.ListRequest{
		Kind:          objectKind,
		Namespace:     config.namespace,
		LabelSelector: config.labelSelector,
		FieldSelector: config.fieldSelector,
		PodFilter:     config.podFilter,
		Limit:         config.limit,
		ContinueToken: config.continueToken,
	}
	if config.used&(optLimit|optContinue) != 0 {
		return call(ctx, c.Cache.List, request)
	}
	merged := &podfitv1.ListResponse{}
	for {
		page, err := call(ctx, c.Cache.List, request)
		if err != nil {
			return nil, err
		}
		merged.Objects = append(merged.Objects, page.Objects...)
		merged.NodeAllocations = append(merged.NodeAllocations, page.NodeAllocations...)
		merged.Generation, merged.ServerEpoch = page.Generation, page.ServerEpoch
		if page.ContinueToken == "" {
			return merged, nil
		}
		request.ContinueToken = page.ContinueToken
	}
}

// Stats counts the cached objects and says the cache generation, which every change moves.
func (c *Client) Stats(ctx context.Context) (*podfitv1.StatsResponse, error) {
	return call(ctx, c.Cache.Stats, &podfitv1.StatsRequest{})
}

// MarkSynced tells a server started with --wait-for-sync that this feeder's initial list of every kind
// is applied: decisions are refused until then. Idempotent; the answer carries the server's epoch, which
// changes when a restart empties the cache (a feeder then relists everything and marks again).
func (c *Client) MarkSynced(ctx context.Context, feeder string) (*podfitv1.MarkSyncedResponse, error) {
	return call(ctx, c.Cache.MarkSynced, &podfitv1.MarkSyncedRequest{Feeder: feeder})
}

// updatesOf converts Apply's and Stream's arguments; field is the request field they fill.
func updatesOf(objects []any, field string) ([]*podfitv1.Update, error) {
	items := flatten(objects)
	updates := make([]*podfitv1.Update, 0, len(items))
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", field, i)
		if d, ok := item.(*Deletion); ok && d != nil {
			item = *d
		}
		switch o := item.(type) {
		case *podfitv1.Update:
			if o == nil {
				return nil, invalidArgument(at, "a nil *Update")
			}
			updates = append(updates, o)
		case Deletion:
			key, err := o.key(at + ".delete")
			if err != nil {
				return nil, err
			}
			updates = append(updates, &podfitv1.Update{Operation: &podfitv1.Update_Delete{Delete: key}})
		default:
			object, err := toClusterObject(item, "", at+".upsert")
			if err != nil {
				return nil, err
			}
			updates = append(updates, &podfitv1.Update{Operation: &podfitv1.Update_Upsert{Upsert: object}})
		}
	}
	return updates, nil
}
