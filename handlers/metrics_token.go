package handlers

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// metricsAuth serves next only to a request that carries the metrics
// token as its bearer token, when one is set (Options.MetricsToken);
// otherwise it answers 401 with the challenge. The comparison takes the
// same time whatever the token sent.
func (h *handler) metricsAuth(next http.HandlerFunc) http.HandlerFunc {
	if h.metricsToken == "" {
		return next
	}
	want := sha256.Sum256([]byte(h.metricsToken))
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok, several := bearerToken(r)
		got := sha256.Sum256([]byte(token))
		switch {
		case several:
			writeProblem(w, r, unauthorized("send one Authorization header, Authorization: Bearer <metrics token>", `, error="invalid_request"`))
		case !ok:
			writeProblem(w, r, unauthorized("/metrics requires the metrics token: send the header Authorization: Bearer <metrics token>", ""))
		case subtle.ConstantTimeCompare(got[:], want[:]) != 1:
			writeProblem(w, r, unauthorized("the bearer token is not the metrics token", `, error="invalid_token"`))
		default:
			next(w, r)
		}
	}
}
