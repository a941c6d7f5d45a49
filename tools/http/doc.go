// Package http is cursorflow's http tool, compatible with NoETL's
// `kind: http` tasks.
//
// Task configuration (every value already rendered):
//
//	method           GET (default), POST, PUT, PATCH, DELETE, ...
//	url | endpoint   absolute URL (required)
//	params           query parameters; numbers print without ".0",
//	                 booleans lower-case, lists repeat the key, nil is dropped
//	headers          request headers
//	data             NoETL's unified map: {query, body} when it has either
//	                 key; otherwise the query for GET/DELETE/HEAD/OPTIONS and
//	                 the body for other methods
//	json             body encoded as JSON
//	body | payload   a string is sent as is; anything else as JSON
//	form             a map sent as application/x-www-form-urlencoded (so is
//	                 any map body when headers set that Content-Type)
//	timeout | timeout_seconds   seconds, default 30
//	follow_redirects default true
//	auth             keychain alias: a "token" field → Bearer; "api_key" →
//	                 header_name (default X-API-Key); username/password →
//	                 Basic. Also NoETL's blocks: {type, credential: alias}
//	                 (an api_key block's header_name wins), {alias: {type,
//	                 ...}}, and inline {type: bearer, token}, {type: basic,
//	                 username, password}, {type: api_key, value,
//	                 header_name}; any other block is refused
//
// A credential goes only to the hosts its keychain entry allows
// (tools.Credential.AllowsHost: its hosts: list, else the host of its own
// url, else nowhere): a request to another host fails with an error
// wrapping tools.ErrHostNotAllowed before anything is sent, and a
// redirect to such a host is followed without the credential's header
// (a redirect to the first request's own origin keeps it: an inline auth
// block allows no other). A redirect from https to plain http is followed
// without it too, even to an allowed host; a request that carries a
// revealed secret reference does not follow such a redirect, nor one to a
// host the secret's entry does not allow: the redirect is the response.
// User info in the url (https://user:pass@host) is sent as Basic
// authorization and handled as an inline credential: redacted from the
// response, left behind on a redirect to another origin.
// A redirect to another origin carries no Referer (it would quote the
// query string), unless the task set one. At most 10 redirects are
// followed. Error texts name the URL without its user info and query.
// With auth set, the response's headers and body are redacted of the
// credential's secrets (tools.RedactValue) before they become the Output,
// so an endpoint that echoes its request puts no token into results,
// events or logs.
//
// The Output follows NoETL's envelope: Status "success" for 2xx and
// "error" otherwise; Data is {"status_code", "headers" (lower-cased names),
// "data" (the parsed JSON body, or the body text when it is not JSON)} even
// for non-2xx responses, so policies can inspect it; HTTP is {"status",
// "headers"}; Error is "HTTP <code>: <start of body>". A transport failure
// or timeout is an error Output with status_code 0; a request that ran
// out of time (the task's timeout, the step's spec.timeout, a dial or read
// timeout) also has HTTP "timeout": true, which policy rules see as
// output.error.kind "timeout", as they do an HTTP 408 or 504. Such an
// Output, and one whose body could not be read, has Data "retryable"
// (output.error.retryable to policy rules): true for a timeout, for a
// request that reached no server (a connection refused or unreachable, a
// DNS lookup that failed for now) and, when its method is idempotent (GET,
// HEAD, OPTIONS, TRACE, PUT, DELETE), for a connection lost during the
// exchange (reset, closed early, a body cut short): a POST the server may
// have acted on is not sent twice by a rule that retries what is
// retryable. An unknown host, a certificate refused, a cancel and a body
// over the size cap are not retryable.
//
// A body the server sends with Content-Encoding gzip or deflate is
// decoded, also when the task asked for it with its own Accept-Encoding
// header (net/http decodes only what it asked for itself); MaxBodyBytes
// caps the decoded body, so a small body that expands to gigabytes is an
// error once it passes the cap. A body that stops arriving before the
// timeout (a server that trickles it) is a timeout like a missing
// response, with the status the headers carried.
//
// A streamed body — application/x-ndjson (or jsonl) records, or the data
// lines of text/event-stream — is handed on record by record as partial
// results while it arrives ({"page": n, "data": record}, redacted like the
// Output; see tools.Call.EmitPartial); the Output still holds the whole
// body. A body cut short (a timeout, a reset, the size cap) hands on no
// part of the record it was cut in.
//
// One Tool shares one *http.Client (see NewClient) across every call.
//
// # Throttled hosts
//
// When a host answers 429 Too Many Requests, the tool learns how many
// requests the host admitted in its window (Retry-After, or one second)
// and from then on spaces requests to that host to stay under that
// limit, instead of being refused most of each window. A task's retry
// policy still sees the 429 that taught the limit. Config.NoPacing turns
// this off.
package http
