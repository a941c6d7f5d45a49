package mysql

import (
	"errors"
	"net"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
)

// ParseCredential turns a cursor credential into a go-sql-driver
// configuration. It accepts a go-sql-driver DSN
// (user:pass@tcp(host:3306)/db?param=value) or a URL
// (mysql://user:pass@host:3306/db?param=value, also mariadb://), and
// forces the settings the driver relies on: multiStatements (a claim may
// hold several statements), parseTime (DATE, DATETIME and TIMESTAMP
// columns become RFC 3339 strings) and a UTC location unless the
// credential names one. Errors never quote the credential, which may hold
// a password.
func ParseCredential(credential string) (*gomysql.Config, error) {
	c := strings.TrimSpace(credential)
	if c == "" {
		return nil, errors.New("empty credential: want a DSN user:pass@tcp(host:port)/db or a mysql:// URL")
	}
	dsn := c
	if scheme, _, ok := strings.Cut(c, "://"); ok && (strings.EqualFold(scheme, "mysql") || strings.EqualFold(scheme, "mariadb")) {
		var err error
		dsn, err = urlToDSN(c)
		if err != nil {
			return nil, err
		}
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("the credential is not a valid mysql data source name")
	}
	cfg.MultiStatements = true
	cfg.ParseTime = true
	return cfg, nil
}

// urlToDSN converts mysql://user:pass@host:port/db?params into the
// go-sql-driver form.
func urlToDSN(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("the credential is not a valid mysql:// URL")
	}
	cfg := gomysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "3306")
	}
	cfg.Net = "tcp"
	cfg.Addr = host
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	// Round-trip through FormatDSN so that the query parameters are
	// parsed by go-sql-driver itself, with its own validation.
	dsn := cfg.FormatDSN()
	if u.RawQuery != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + u.RawQuery
	}
	return dsn, nil
}
