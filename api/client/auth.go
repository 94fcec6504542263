package client

import (
	"context"
	"net/http"
)

// WithBearerToken returns a ClientOption that sends token as
// `Authorization: Bearer <token>` with every request, as a server configured
// with LEASEAPI_API_TOKENS requires. An empty token sends no header.
func WithBearerToken(token string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	})
}
