package podfit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/podfit/podfit/sdk/go/podfitv1"
)

// Stream is a long-lived feed of update batches (ClusterCache.Stream): each batch is applied
// atomically and acknowledged in order. A batch the server finds invalid is refused in band (the
// acknowledgement's Error and ErrorField are set, Generation is 0, nothing of it is applied) and the
// stream goes on.
//
// One goroutine may Send while another Recvs, as with any gRPC stream; Send is not safe for
// concurrent use. Cancel the context given to Client.Stream to abandon the stream.
type Stream struct {
	ctx      context.Context
	stream   grpc.BidiStreamingClient[podfitv1.StreamRequest, podfitv1.StreamResponse]
	sequence uint64
}

// Stream opens a feed; see the Stream type.
func (c *Client) Stream(ctx context.Context) (*Stream, error) {
	stream, err := c.Cache.Stream(ctx)
	if err != nil {
		return nil, wrapError(ctx, err)
	}
	return &Stream{ctx: ctx, stream: stream}, nil
}

// Send sends one batch of objects (and Deletions), converted as Apply converts them, under the next
// sequence number (1, 2, ...), which it returns; the acknowledgement echoes it. An object the SDK
// cannot convert is refused with an *Error and nothing is sent.
//
// When the stream has failed Send returns io.EOF: Recv returns the stream's error.
func (s *Stream) Send(objects ...any) (uint64, error) {
	updates, err := updatesOf(objects, "updates")
	if err != nil {
		return 0, err
	}
	sequence := s.sequence + 1
	if err := s.SendRequest(&podfitv1.StreamRequest{Sequence: sequence, Updates: updates}); err != nil {
		return 0, err
	}
	return sequence, nil
}

// SendRequest sends a batch built by hand; the next Send numbers its batch after request.Sequence.
func (s *Stream) SendRequest(request *podfitv1.StreamRequest) error {
	if err := s.stream.Send(request); err != nil {
		return wrapError(s.ctx, err)
	}
	s.sequence = request.GetSequence()
	return nil
}

// Recv returns the next acknowledgement, in the order the batches were sent. It returns io.EOF after
// CloseSend once every batch is acknowledged, and an *Error when the stream fails.
func (s *Stream) Recv() (*podfitv1.StreamResponse, error) {
	response, err := s.stream.Recv()
	if err != nil {
		return nil, wrapError(s.ctx, err)
	}
	return response, nil
}

// CloseSend says no batch follows; the acknowledgements of those sent can still be received.
func (s *Stream) CloseSend() error {
	return s.stream.CloseSend()
}
