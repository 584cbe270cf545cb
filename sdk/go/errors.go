package podfit

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FieldViolation is one invalid input of a request: its path in the request as the server reports it
// (e.g. "updates[1].upsert.pod.spec.containers[0].resources.requests.cpu") and why it is invalid.
type FieldViolation struct {
	Field       string
	Description string
}

// Error is what every Client method returns when a call fails, so callers need one type to inspect:
// the gRPC status code, the server's message and the google.rpc details it attached (BadRequest field
// violations, ErrorInfo reason). Use errors.As to get it; status.FromError and status.Code also work,
// since Error carries the original status (details included).
//
// Inputs the SDK cannot even encode (an unknown kind, a value that is not a Kubernetes object) are
// refused before anything is sent, as the server would refuse them: Code InvalidArgument and a field
// violation at the same path.
//
// An unschedulable pod is not an error: it is a successful answer that says, per node, why.
type Error struct {
	// Code is the gRPC status code: InvalidArgument, NotFound, Unauthenticated, Unavailable, ...
	Code codes.Code
	// Message is the status message, without the code.
	Message string
	// FieldViolations come from a google.rpc.BadRequest detail.
	FieldViolations []FieldViolation
	// Reason and Domain come from a google.rpc.ErrorInfo detail (e.g. INVALID_OBJECT, UNKNOWN_PROFILE).
	Reason string
	Domain string

	status *status.Status
	cause  error
}

// Error formats the code and the message, like "podfit: InvalidArgument: ...".
func (e *Error) Error() string {
	return fmt.Sprintf("podfit: %s: %s", e.Code, e.Message)
}

// Unwrap returns the underlying error: the context's error when the call's context was cancelled or
// timed out (so errors.Is(err, context.DeadlineExceeded) works), else the gRPC status error.
func (e *Error) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	return e.GRPCStatus().Err()
}

// GRPCStatus makes status.FromError and status.Code see the status, with its details.
func (e *Error) GRPCStatus() *status.Status {
	if e.status == nil { // an Error made by hand
		return status.New(e.Code, e.Message)
	}
	return e.status
}

// FieldViolation returns the description of the violation at field, and whether there is one.
func (e *Error) FieldViolation(field string) (string, bool) {
	for _, v := range e.FieldViolations {
		if v.Field == field {
			return v.Description, true
		}
	}
	return "", false
}

// wrapError turns what a gRPC call under ctx returned into an *Error; nil and io.EOF (a stream's
// normal end) pass through unchanged.
func wrapError(ctx context.Context, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	var perr *Error
	if errors.As(err, &perr) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	var cause error
	if code := st.Code(); code == codes.Canceled || code == codes.DeadlineExceeded {
		if ctx.Err() != nil {
			cause = ctx.Err()
		} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			cause = err
		}
	}
	e := &Error{Code: st.Code(), Message: st.Message(), status: st, cause: cause}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		case *errdetails.ErrorInfo:
			e.Reason, e.Domain = d.GetReason(), d.GetDomain()
		}
	}
	return e
}

// invalidArgument is an input refused before sending, reported as the server would report it.
func invalidArgument(field, format string, args ...any) *Error {
	description := fmt.Sprintf(format, args...)
	message := description
	if field != "" {
		message = field + ": " + description
	}
	st := status.New(codes.InvalidArgument, message)
	if withDetails, err := st.WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: description}},
	}); err == nil {
		st = withDetails
	}
	return &Error{
		Code:            codes.InvalidArgument,
		Message:         message,
		FieldViolations: []FieldViolation{{Field: field, Description: description}},
		status:          st,
	}
}
