// Package webhook holds the building blocks of leaseapi's webhooks that do
// not depend on a store: the Standard Webhooks signature, webhook ids and
// secrets, the check of a target against IANA's special-purpose address
// registries (a dated table, registry.go) at creation and when the HTTP
// client dials, and the encryption of secrets and URLs at rest.
//
// It imports only the standard library, so the handlers, the delivery loop
// and the tests of a receiver can all use it.
package webhook
