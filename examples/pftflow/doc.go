// Package pftflow is the acceptance test: NoETL's own
// test_pft_flow_v2.yaml, the patient-fetch flow NoETL validates its
// releases with, run byte-for-byte unchanged through the cursorflow CLI
// against the PFT test API (internal/pftapi) and a real PostgreSQL.
//
// The tests build the CLI, start the API in-process on a real socket,
// give each run a database of its own, and check the result tables the
// flow's own check_results step also checks. The fault variant injects 5%
// HTTP 500s, keeps the 50 requests/s throttle and kills the CLI process
// twice at random moments, finishing with `cursorflow resume`.
//
// Run them with:
//
//	go test ./examples/pftflow/ -v
//
// BenchmarkPFTFlow reports the wall time against the rate-limit bound
// (requests the flow must make / rate limit) and the events per patient.
package pftflow
