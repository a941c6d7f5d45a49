// Package testenv gives tests the DSNs of the real backends that
// scripts/testenv brings up. A test whose backend is not configured skips
// with a message locally and fails when CI=true.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Environment variables read by the helpers below; scripts/testenv prints
// and writes them.
const (
	EnvPostgres   = "CURSORFLOW_TEST_POSTGRES"
	EnvMySQL      = "CURSORFLOW_TEST_MYSQL"
	EnvRedis      = "CURSORFLOW_TEST_REDIS"
	EnvNATS       = "CURSORFLOW_TEST_NATS"
	EnvClickHouse = "CURSORFLOW_TEST_CLICKHOUSE"
	EnvS3         = "CURSORFLOW_TEST_S3"
	EnvChromium   = "CURSORFLOW_TEST_CHROMIUM"
)

// Require returns the value of the environment variable env, or skips the
// test (fails it under CI=true) when it is unset.
func Require(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set; under CI=true every backend must be available (run scripts/testenv up)", env)
	}
	t.Skipf("%s is not set: run `eval \"$(scripts/testenv up)\"` or `make test` to bring the backend up", env)
	return ""
}

// Postgres returns the PostgreSQL DSN (postgres://...).
func Postgres(t testing.TB) string { return Require(t, EnvPostgres) }

// MySQL returns the MariaDB/MySQL DSN in go-sql-driver form.
func MySQL(t testing.TB) string { return Require(t, EnvMySQL) }

// Redis returns the Redis URL (redis://...).
func Redis(t testing.TB) string { return Require(t, EnvRedis) }

// NATS returns the NATS URL (nats://...).
func NATS(t testing.TB) string { return Require(t, EnvNATS) }

// ClickHouse returns the ClickHouse URL (clickhouse://...).
func ClickHouse(t testing.TB) string { return Require(t, EnvClickHouse) }

// S3 returns the S3 endpoint as a gocloud.dev s3blob URL base.
func S3(t testing.TB) string { return Require(t, EnvS3) }

// Chromium returns the path of the Chromium binary that browser tests
// drive. Set but missing (not installed) counts as unavailable.
func Chromium(t testing.TB) string {
	t.Helper()
	path := Require(t, EnvChromium)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s=%s: %v; under CI=true the browser must be installed (run scripts/testenv up)", EnvChromium, path, err)
		}
		t.Skipf("%s=%s: %v: run scripts/testenv up to install Debian's chromium", EnvChromium, path, err)
	}
	return path
}

// EnvPsycopg2Python names a Python interpreter that imports psycopg2,
// which NoETL's python tasks use to reach PostgreSQL themselves.
const EnvPsycopg2Python = "CURSORFLOW_TEST_PSYCOPG2_PYTHON"

// Psycopg2Python returns the path of a Python interpreter that imports
// psycopg2. Set but unable to import it counts as unavailable.
func Psycopg2Python(t testing.TB) string {
	t.Helper()
	path := Require(t, EnvPsycopg2Python)
	if out, err := exec.Command(path, "-c", "import psycopg2").CombinedOutput(); err != nil {
		unavailable(t, "%s=%s cannot import psycopg2 (%v: %s): run scripts/testenv up to install Debian's python3-psycopg2", EnvPsycopg2Python, path, err, out)
	}
	return path
}
