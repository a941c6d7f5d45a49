package mysql_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cursorflow/cursorflow/cursor"
	"github.com/cursorflow/cursorflow/drivers/mysql"
	"github.com/cursorflow/cursorflow/dsl"
)

func TestParseCredential(t *testing.T) {
	tests := []struct {
		name       string
		credential string
		user, pass string
		addr, db   string
		wantErr    string
	}{
		{name: "dsn", credential: "root@tcp(127.0.0.1:3306)/test", user: "root", addr: "127.0.0.1:3306", db: "test"},
		{name: "dsn with params", credential: "u:p@tcp(db:3307)/q?parseTime=false&timeout=5s", user: "u", pass: "p", addr: "db:3307", db: "q"},
		{name: "url", credential: "mysql://u:s3cret@db.example:3307/queue?timeout=5s", user: "u", pass: "s3cret", addr: "db.example:3307", db: "queue"},
		{name: "url default port", credential: "mariadb://u@db/queue", user: "u", addr: "db:3306", db: "queue"},
		{name: "url ipv6", credential: "mysql://u@[::1]/queue", user: "u", addr: "[::1]:3306", db: "queue"},
		{name: "url escaped password", credential: "mysql://u:p%40ss@h:1/d", user: "u", pass: "p@ss", addr: "h:1", db: "d"},
		{name: "empty", credential: "  ", wantErr: "empty credential"},
		{name: "garbage", credential: "u:hunter2@tcp(h:1/d", wantErr: "not a valid mysql data source name"},
		{name: "bad url param", credential: "mysql://u:hunter2@h/d?timeout=forever", wantErr: "not a valid mysql data source name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mysql.ParseCredential(tt.credential)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %q leaks the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.User != tt.user || cfg.Passwd != tt.pass || cfg.Addr != tt.addr || cfg.DBName != tt.db {
				t.Fatalf("got user %q pass %q addr %q db %q", cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName)
			}
			if !cfg.MultiStatements || !cfg.ParseTime {
				t.Fatalf("MultiStatements %v ParseTime %v, want both forced on", cfg.MultiStatements, cfg.ParseTime)
			}
		})
	}
}

func TestDriverContract(t *testing.T) {
	d := mysql.New(mysql.Config{})
	defer d.Close()
	f := d.Features()
	if !f.BatchClaim || !f.ClaimTemplate || !f.Attempts || !f.DeadLetter || f.LeaseExpiry || f.Fencing || f.NeedsAck {
		t.Fatalf("Features() = %+v", f)
	}
	opts := d.TemplateOptions()
	for _, k := range []string{"mark", "ack", "release", "dead_letter"} {
		if !slices.Contains(opts, k) {
			t.Errorf("TemplateOptions() = %v, missing %q", opts, k)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	claim, err := dsl.CompileTemplate("SELECT 1 AS id", dsl.Pos{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec cursor.Spec
		want string
	}{
		{"no claim", cursor.Spec{Credential: "root@tcp(127.0.0.1:1)/x"}, "no claim statement"},
		{"bad credential", cursor.Spec{Credential: "root:hunter2@tcp(x", Claim: claim}, "not a valid mysql data source name"},
		{"bad mark", cursor.Spec{Credential: "root@tcp(127.0.0.1:1)/x", Claim: claim, Options: map[string]any{"mark": 7}}, `option "mark" is int`},
		{"bad key", cursor.Spec{Credential: "root@tcp(127.0.0.1:1)/x", Claim: claim, Options: map[string]any{"key": 7}}, `option "key" is int`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mysql.New(mysql.Config{})
			defer d.Close()
			tt.spec.Kind, tt.spec.Auth = "mysql", "alias"
			_, err := d.Open(context.Background(), tt.spec)
			var ce *cursor.ClaimError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want a ClaimError containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q leaks the password", err)
			}
		})
	}
	d := mysql.New(mysql.Config{})
	_ = d.Close()
	if _, err := d.Open(context.Background(), cursor.Spec{Credential: "root@tcp(h:1)/d", Claim: claim}); !errors.Is(err, cursor.ErrClosed) {
		t.Fatalf("Open after Close: %v, want ErrClosed", err)
	}
}
