// Package webhook holds the building blocks of leaseapi's webhooks that do
// not depend on a store: the Standard Webhooks signature, webhook ids and
// secrets, the HTTP client that refuses private targets when it dials, and
// the encryption of secrets and URLs at rest.
//
// It imports only the standard library, so the handlers, the delivery loop
// and the tests of a receiver can all use it.
package webhook
