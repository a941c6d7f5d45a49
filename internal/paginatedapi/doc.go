// Package paginatedapi is a Go rendition of NoETL's mock "paginated API"
// test server (tests/fixtures/servers/paginated_api.py in noetl/noetl),
// the HTTP service NoETL's pagination playbooks
// (tests/fixtures/playbooks/pagination/...) call. It is an http.Handler,
// so a test serves it with httptest and points the playbooks' api_url at
// it.
//
// The endpoints, their query parameters, response shapes and counts follow
// NoETL's server (35 items, 10 per page by default):
//
//	GET  /api/v1/assessments?page=N&pageSize=M   page numbers: {data, paging{hasMore, page, pageSize, total}}
//	GET  /api/v1/users?offset=N&limit=M          offsets: {users, has_more, offset, limit, total}
//	GET  /api/v1/events?cursor=C&limit=M         cursors: {events, next_cursor (base64 page number, null on the last page), limit}
//	GET  /api/v1/flaky?page=N&fail_on=2,3        HTTP 500 on the first request for each listed page, then as assessments
//	POST /api/v1/flaky/reset                     forgets the flaky endpoint's attempts
//	GET  /api/v1/heavy?page=N&pageSize=M&payload_kb=K   100 items, each with a K KiB payload
//	GET  /api/v1/heavy/stats                     the heavy endpoint's configuration
//	GET  /api/v1/errors?error_type=T             429, 500, 503, auth (401), 403, 404, timeout; else a page
//	GET  /api/v1/rate-limited?page=N&requests_per_second=R   429 + Retry-After past R requests in one second
//	GET  /api/v1/patient-records?patientId=P&page=N&pageSize=M   a FHIR-like Bundle, 2–5 pages per patient
//	POST /api/v1/concurrency/reset               zeroes the probe counters
//	GET  /api/v1/concurrency/stats               {started, completed, active, max_active}
//	GET  /api/v1/concurrency/probe?delay_seconds=S&label=L   answers after S seconds, counted
//	GET  /health                                 {status: ok}
//
// Errors are FastAPI's: {"detail": ...} with the status, and 422 for a
// query parameter that is not a number where one is wanted.
//
// Two endpoints are inferred rather than transcribed, since no published
// version of NoETL's server holds them: the concurrency probe (its shape
// is what test_pagination_basic.yaml reads back) and the meta block and
// min_delay/max_delay parameters of patient-records (what
// test_fetch_load.yaml and its README read and send). Their comments say
// so. Values NoETL draws at random (heavy payloads, a patient's page
// count) are deterministic here, so runs repeat exactly.
package paginatedapi
