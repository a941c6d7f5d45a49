// Package pftapi serves the paginated patient API that the PFT flow playbook
// (noetl-playbooks/pft_flow_test/test_pft_flow_v2.yaml) drains: a test
// fixture, specified in shared/pft-api.md, for end-to-end tests and the
// examples/pftapi server.
//
// Every answer is deterministic per input: page counts, record values,
// demographics and MDS details derive from the MD5 digest of the request's
// identifiers read as a big-endian integer (see [Hash]). Like the service it
// imitates, the API throttles: one global sliding window of one second admits
// at most [Config.RateLimit] requests and refuses the rest with
// 429 {"detail":"Too Many Requests"} and Retry-After: 1. For fault-tolerance
// tests it can also answer a fraction of requests with
// 500 {"detail":"injected"} and add latency to every answer.
//
// [Server.Stats] counts requests per endpoint, refusals and injected
// failures, so a test can check how many calls a flow made.
//
// Endpoints:
//
//	GET /api/v1/patient/{assessments|conditions|medications|vital_signs}?patientId=P&page=N
//	GET /api/v1/patient/demographics?patientId=P
//	GET /api/v1/pft/mds/details?assessmentId=A
//	GET /health
package pftapi
