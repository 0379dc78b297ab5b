package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cardboxhq/cardbox/internal/pgtest"
	"github.com/cardboxhq/cardbox/internal/testbin"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestComposeStartsAndServes runs cardboxd as docker-compose.yml and the
// Dockerfile would, without a container engine: the command line and
// environment are theirs, with test ports, a test data directory, the
// secrets deploy/make-secrets.sh makes, and a database and role made by the
// compose file's own Postgres init script on the test server. The server
// must start in hosted mode on the image's wildcard addresses, pass the
// compose health check, log in as the init script's role (no superuser),
// and take the operator key from the secret, on this start and the next;
// a secret file with another secret for the same key id stops the start.
func TestComposeStartsAndServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs cardboxd")
	}
	img := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	f := readCompose(t)
	svc, pg := f.service(t, "cardboxd"), f.service(t, "postgres")
	checkImage(t, img)
	checkComposeFile(t, f, svc, pg)

	secrets := makeSecrets(t, t.TempDir())
	bin := buildBinaries(t)

	// The database and its owner, by the init script the postgres service
	// mounts, on the test server.
	pgEnv := withSecrets(t, f, pg, pg.environment(t), secrets)
	role, dbName := initDatabase(t, initScript(t, pg), pgEnv)

	// cardboxd's command line and environment: the image's, then the
	// service's, with the secrets' paths, the test database, a test data
	// directory and free ports.
	env := append(append([][2]string(nil), img.env...), svc.environment(t)...)
	env = withSecrets(t, f, svc, env, secrets)
	dbURL, _ := lookup(env, "CARDBOX_DATABASE_URL")
	env = append(env, [2]string{"CARDBOX_DATABASE_URL", testDatabaseURL(t, dbURL, role, dbName)})
	env = append(env, [2]string{"CARDBOX_DATA_DIR", t.TempDir()})
	binAddr, _ := lookup(env, "CARDBOX_BINARY_ADDR")
	httpAddr, _ := lookup(env, "CARDBOX_HTTP_ADDR")
	binAddr, httpAddr = freePort(t, binAddr), freePort(t, httpAddr)
	env = append(env, [2]string{"CARDBOX_BINARY_ADDR", binAddr}, [2]string{"CARDBOX_HTTP_ADDR", httpAddr})
	env = append(env, [2]string{"PATH", bin + string(os.PathListSeparator) + os.Getenv("PATH")}, [2]string{"HOME", t.TempDir()})
	command := argv(t, "cardboxd entrypoint", svc.Entrypoint)
	if command == nil {
		command = img.entrypoint
	}
	if args := argv(t, "cardboxd command", svc.Command); args != nil {
		command = append(command, args...)
	} else if svc.Entrypoint == nil {
		command = append(command, img.cmd...)
	}
	health := svc.Healthcheck.Test
	if len(health) == 0 {
		health = append([]string{"CMD"}, img.healthcheck...)
	}
	if health[0] != "CMD" {
		t.Fatalf("cardboxd's health check %v: want the exec form [CMD, ...]", health)
	}
	health = health[1:]

	base := "http://" + loopbackOf(t, httpAddr)
	operator := readFile(t, secrets["operator_key"])

	srv := start(t, bin, command, env)
	out := srv.waitHealthy(t, bin, health, env)
	if !strings.HasPrefix(out, "ok: ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("health check printed %q, want one line saying ok", out)
	}
	if got := status(t, "GET", base+"/admin/tenants", "", ""); got != http.StatusUnauthorized {
		t.Fatalf("GET /admin/tenants without a key: %d, want 401 (hosted mode)", got)
	}
	if got := status(t, "GET", base+"/admin/tenants", operator, ""); got != http.StatusOK {
		t.Fatalf("GET /admin/tenants with the operator key from the secret: %d, want 200\n%s", got, srv.log)
	}
	checkLogin(t, role, dbName)
	// The README's first steps: a tenant, its admin key, a card.
	if got := status(t, "POST", base+"/admin/tenants", operator, `{"tenant_id": "acme", "name": "Acme Inc"}`); got != http.StatusCreated {
		t.Fatalf("POST /admin/tenants: %d, want 201\n%s", got, srv.log)
	}
	tenantKey := createKey(t, base, operator, `{"tenant_id": "acme", "role": "admin"}`)
	card := `{"card_id": "c1", "content": "hello", "metadata": {"type": "task.instruction"}}`
	if got := status(t, "POST", base+"/projects/acme/cards", tenantKey, card); got != http.StatusCreated {
		t.Fatalf("POST /projects/acme/cards with the tenant's admin key: %d, want 201\n%s", got, srv.log)
	}
	srv.stop(t)
	if strings.Contains(srv.log.String(), operator) {
		t.Fatal("cardboxd logged the operator key's secret")
	}

	// docker compose restart: the same secret finds its key.
	srv = start(t, bin, command, env)
	srv.waitHealthy(t, bin, health, env)
	if got := status(t, "GET", base+"/admin/tenants", operator, ""); got != http.StatusOK {
		t.Fatalf("after a restart, GET /admin/tenants with the operator key: %d, want 200\n%s", got, srv.log)
	}
	srv.stop(t)

	// Another secret for the same key id: the start stops, saying why.
	other := filepath.Join(t.TempDir(), "operator_key")
	id := operator[:len("cbk_key_")+16]
	if err := os.WriteFile(other, []byte(id+"_"+strings.Repeat("A", 43)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv = start(t, bin, command, append(env, [2]string{"CARDBOX_OPERATOR_KEY_FILE", other}))
	code := srv.waitExit(t)
	if code == 0 || !strings.Contains(srv.log.String(), "another secret") {
		t.Fatalf("cardboxd with another secret for key %s: exit %d, want non-zero naming the other secret\n%s", id, code, srv.log)
	}
}

// checkImage checks what the Dockerfile promises beyond what the run
// shows: both binaries built and installed, a user that is not root, and
// the health check.
func checkImage(t *testing.T, img image) {
	t.Helper()
	built := strings.Join(img.buildRuns, "\n")
	for _, pkg := range []string{"./cmd/cardboxd", "./cmd/cardbox"} {
		if !regexp.MustCompile(`go build .*` + regexp.QuoteMeta(pkg) + `(\s|$)`).MatchString(built) {
			t.Errorf("the Dockerfile's build does not build %s", pkg)
		}
	}
	copied := strings.Join(img.copies, "\n")
	for _, b := range []string{"cardboxd", "cardbox"} {
		if !regexp.MustCompile(`/` + b + `(\s|$)`).MatchString(copied) {
			t.Errorf("the Dockerfile's final stage does not copy %s", b)
		}
	}
	user, _, _ := strings.Cut(img.user, ":")
	if user == "" || user == "root" || user == "0" {
		t.Errorf("the Dockerfile's final stage runs as %q, want an unprivileged user", img.user)
	}
	if mode, _ := lookup(img.env, "CARDBOX_MODE"); mode != "hosted" {
		t.Errorf("the image's CARDBOX_MODE is %q, want hosted", mode)
	}
	if !slices.Equal(img.healthcheck, []string{"cardbox", "health"}) {
		t.Errorf("the image's health check is %v, want cardbox health", img.healthcheck)
	}
	if !slices.Equal(img.entrypoint, []string{"cardboxd"}) {
		t.Errorf("the image's entrypoint is %v, want cardboxd", img.entrypoint)
	}
}

// checkComposeFile checks what the compose file promises beyond what the
// run shows: the image built here, ports published on loopback only,
// the data directory on a named volume, Postgres's health check and the
// order of start.
func checkComposeFile(t *testing.T, f composeFile, svc, pg composeService) {
	t.Helper()
	if svc.Build != "." {
		t.Errorf("cardboxd builds %v, want this directory's Dockerfile (build: .)", svc.Build)
	}
	if d := svc.DependsOn["postgres"]; d.Condition != "service_healthy" {
		t.Errorf("cardboxd depends on postgres with condition %q, want service_healthy", d.Condition)
	}
	if !strings.HasPrefix(pg.Image, "postgres:") {
		t.Errorf("postgres image %q", pg.Image)
	}
	if len(pg.Healthcheck.Test) < 2 || pg.Healthcheck.Test[0] != "CMD" || pg.Healthcheck.Test[1] != "pg_isready" {
		t.Errorf("postgres health check %v, want pg_isready", pg.Healthcheck.Test)
	}
	env := svc.environment(t)
	listen := map[string]bool{}
	for _, k := range []string{"CARDBOX_BINARY_ADDR", "CARDBOX_HTTP_ADDR"} {
		v, ok := lookup(env, k)
		if !ok {
			t.Errorf("cardboxd's environment has no %s", k)
			continue
		}
		_, port, _ := net.SplitHostPort(v)
		listen[port] = true
	}
	ports := svc.published(t)
	for _, p := range ports {
		if p.hostIP != "127.0.0.1" {
			t.Errorf("port %s is published on %q by default, want 127.0.0.1", p.containerPort, p.hostIP)
		}
		if !listen[p.containerPort] {
			t.Errorf("port %s is published but cardboxd does not listen on it", p.containerPort)
		}
	}
	if len(ports) != len(listen) {
		t.Errorf("cardboxd publishes %d ports, listens on %d", len(ports), len(listen))
	}
	dataDir, _ := lookup(env, "CARDBOX_DATA_DIR")
	onVolume := false
	for _, m := range svc.mounts(t) {
		if _, named := f.Volumes[m.source]; named && m.target == dataDir {
			onVolume = true
		}
	}
	if !onVolume {
		t.Errorf("cardboxd's data directory %q is not on a named volume", dataDir)
	}
	u, err := url.Parse(mustLookup(t, env, "CARDBOX_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	pgUser, _ := lookup(pg.environment(t), "POSTGRES_USER")
	if pgUser == "" {
		pgUser = "postgres" // the image's superuser
	}
	if u.User.Username() == pgUser {
		t.Errorf("cardboxd logs in as %s, the Postgres superuser", pgUser)
	}
	if _, ok := u.User.Password(); ok {
		t.Errorf("cardboxd's database URL holds a password: take it from a secret")
	}
	if role, _ := lookup(pg.environment(t), "CARDBOX_DB_USER"); role != u.User.Username() {
		t.Errorf("cardboxd logs in as %q, the init script makes %q", u.User.Username(), role)
	}
	if db, _ := lookup(pg.environment(t), "CARDBOX_DB_NAME"); "/"+db != u.Path {
		t.Errorf("cardboxd uses database %q, the init script makes %q", u.Path, db)
	}
	if u.Hostname() != "postgres" {
		t.Errorf("cardboxd's database host is %q, want the postgres service", u.Hostname())
	}
}

func mustLookup(t *testing.T, env [][2]string, key string) string {
	t.Helper()
	v, ok := lookup(env, key)
	if !ok {
		t.Fatalf("no %s", key)
	}
	return v
}

// makeSecrets runs deploy/make-secrets.sh into dir/secrets and returns
// each secret's file by name.
func makeSecrets(t *testing.T, dir string) map[string]string {
	t.Helper()
	dir = filepath.Join(dir, "secrets")
	out, err := exec.Command("sh", filepath.Join(root, "deploy", "make-secrets.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/make-secrets.sh: %v\n%s", err, out)
	}
	files := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		files[e.Name()] = filepath.Join(dir, e.Name())
	}
	return files
}

// withSecrets returns env with each path of a secret the service mounts
// replaced by the file made here; a /run/secrets/ path the service does
// not mount is an error (the container would not have it).
func withSecrets(t *testing.T, f composeFile, s composeService, env [][2]string, made map[string]string) [][2]string {
	t.Helper()
	out := slices.Clone(env)
	mounted := s.secretPaths(t)
	for i, kv := range out {
		for name, inContainer := range mounted {
			top, ok := f.Secrets[name]
			if !ok {
				t.Fatalf("secret %s is not declared at the top level", name)
			}
			local, ok := made[filepath.Base(top.File)]
			if !ok || filepath.Dir(filepath.Clean(top.File)) != filepath.Join("deploy", "secrets") {
				t.Fatalf("secret %s's file %s is not one deploy/make-secrets.sh makes in deploy/secrets", name, top.File)
			}
			kv[1] = strings.ReplaceAll(kv[1], inContainer, local)
		}
		if strings.Contains(kv[1], "/run/secrets/") {
			t.Fatalf("%s=%s names a secret the service does not mount", kv[0], kv[1])
		}
		out[i] = kv
	}
	return out
}

// initScript is the host path of the script the postgres service mounts
// in /docker-entrypoint-initdb.d/.
func initScript(t *testing.T, pg composeService) string {
	t.Helper()
	var scripts []string
	for _, m := range pg.mounts(t) {
		if strings.HasPrefix(m.target, "/docker-entrypoint-initdb.d/") {
			scripts = append(scripts, filepath.Join(root, filepath.FromSlash(m.source)))
		}
	}
	if len(scripts) != 1 {
		t.Fatalf("postgres mounts %d init scripts, want 1", len(scripts))
	}
	return scripts[0]
}

var dbSeq atomic.Int64

// initDatabase runs the init script against the test server as its
// superuser, as the postgres image runs it, with a role and database
// name of this test's own (roles belong to the whole server), and checks
// the role it made. Both are dropped when the test ends.
func initDatabase(t *testing.T, script string, pgEnv [][2]string) (role, db string) {
	t.Helper()
	n := dbSeq.Add(1)
	role = fmt.Sprintf("deploytest_%d_%d", os.Getpid(), n)
	db = role
	super := pgtest.SuperuserURL("postgres")
	cfg, err := pgx.ParseConfig(super)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, super)
		if err != nil {
			t.Errorf("drop %s: %v", db, err)
			return
		}
		defer conn.Close(ctx)
		for _, sql := range []string{
			"DROP DATABASE IF EXISTS " + pgx.Identifier{db}.Sanitize() + " WITH (FORCE)",
			"DROP ROLE IF EXISTS " + pgx.Identifier{role}.Sanitize(),
		} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	psql, err := findPsql()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = []string{"PATH=" + filepath.Dir(psql) + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range pgEnv {
		cmd.Env = append(cmd.Env, kv[0]+"="+kv[1])
	}
	cmd.Env = append(cmd.Env,
		"CARDBOX_DB_USER="+role, "CARDBOX_DB_NAME="+db,
		"POSTGRES_USER="+cfg.User, "POSTGRES_DB="+cfg.Database,
		"PGHOST="+cfg.Host, fmt.Sprintf("PGPORT=%d", cfg.Port), "PGPASSWORD="+cfg.Password, "PGSSLMODE=disable")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v (the test server's role must be able to create roles)\n%s", script, err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, super)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super_, createRole, createDB, bypassRLS, login bool
	var owner string
	err = conn.QueryRow(ctx, `SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls, r.rolcanlogin,
			pg_get_userbyid(d.datdba)
		FROM pg_roles r, pg_database d WHERE r.rolname = $1 AND d.datname = $2`, role, db).
		Scan(&super_, &createRole, &createDB, &bypassRLS, &login, &owner)
	if err != nil {
		t.Fatalf("the role and database the init script made: %v", err)
	}
	if super_ || !createRole || createDB || bypassRLS || !login || owner != role {
		t.Fatalf("role %s: superuser %v, createrole %v, createdb %v, bypassrls %v, login %v; database owner %s: "+
			"want a login role, CREATEROLE only, owning the database", role, super_, createRole, createDB, bypassRLS, login, owner)
	}
	return role, db
}

// findPsql finds psql on PATH or beside the PostgreSQL server binaries.
func findPsql() (string, error) {
	if p, err := exec.LookPath("psql"); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(matches) > 0 {
		slices.Sort(matches)
		return matches[len(matches)-1], nil
	}
	return "", errors.New("psql not found (install the PostgreSQL client, e.g. apt-get install -y postgresql)")
}

// testDatabaseURL is the compose file's database URL on the test server:
// its query (the passfile, sslmode) kept, the host, port, role and
// database replaced.
func testDatabaseURL(t *testing.T, composeURL, role, db string) string {
	t.Helper()
	u, err := url.Parse(composeURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(pgtest.SuperuserURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if strings.HasPrefix(cfg.Host, "/") {
		// A unix socket's directory goes in the query.
		u.Host = ""
		q.Set("host", cfg.Host)
		q.Set("port", fmt.Sprint(cfg.Port))
	} else {
		u.Host = net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	}
	u.RawQuery = q.Encode()
	u.User = url.User(role)
	u.Path = "/" + db
	return u.String()
}

// freePort keeps addr's host (the image's 0.0.0.0: what hosted mode may
// listen on) and takes a free port.
func freePort(t *testing.T, addr string) string {
	t.Helper()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen address %q: %v", addr, err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port)
}

// loopbackOf is where a client on this machine reaches addr.
func loopbackOf(t *testing.T, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// buildBinaries builds cardboxd and cardbox as the Dockerfile does
// (CGO off), into a directory of their own.
func buildBinaries(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "./cmd/cardboxd", "./cmd/cardbox")
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// server is a running cardboxd.
type server struct {
	cmd    *exec.Cmd
	log    *testbin.Output
	exited chan struct{} // closed once the process has exited
}

// start runs command (its first word found in bin) with exactly env, as a
// container's process has exactly its image's and service's variables.
func start(t *testing.T, bin string, command []string, env [][2]string) *server {
	t.Helper()
	s := &server{log: &testbin.Output{}, exited: make(chan struct{})}
	s.cmd = exec.Command(filepath.Join(bin, command[0]), command[1:]...)
	for _, kv := range env {
		s.cmd.Env = append(s.cmd.Env, kv[0]+"="+kv[1])
	}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			<-s.exited
		}
	})
	return s
}

// waitHealthy runs the health check as the container runtime would (the
// same environment as the server) until it passes, and returns its
// output. The server exiting first, or 60 s passing, fails the test.
func (s *server) waitHealthy(t *testing.T, bin string, check []string, env [][2]string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		select {
		case <-s.exited:
			t.Fatalf("cardboxd exited (%v) before it was healthy:\n%s", s.cmd.ProcessState, s.log)
		default:
		}
		cmd := exec.Command(filepath.Join(bin, check[0]), check[1:]...)
		for _, kv := range env {
			cmd.Env = append(cmd.Env, kv[0]+"="+kv[1])
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			return string(out)
		}
		last = string(out)
		if time.Now().After(deadline) {
			t.Fatalf("health check %v still failing after 60 s (%v: %s); cardboxd:\n%s", check, err, last, s.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM (docker stop) and wants a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.waitExit(t); code != 0 {
		t.Fatalf("cardboxd exited %d after SIGTERM:\n%s", code, s.log)
	}
}

// waitExit waits up to 60 s for the process to exit and returns its code.
func (s *server) waitExit(t *testing.T) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("cardboxd still running after 60 s:\n%s", s.log)
	}
	return s.cmd.ProcessState.ExitCode()
}

// status sends a request (with key as a bearer token unless empty) and
// returns the answer's status.
func status(t *testing.T, method, u, key, body string) int {
	t.Helper()
	res, _ := request(t, method, u, key, body)
	return res
}

func request(t *testing.T, method, u, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// createKey creates a key over /admin/keys and returns its secret.
func createKey(t *testing.T, base, operator, body string) string {
	t.Helper()
	code, b := request(t, "POST", base+"/admin/keys", operator, body)
	if code != http.StatusCreated {
		t.Fatalf("POST /admin/keys %s: %d %s, want 201", body, code, b)
	}
	var created struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(b, &created); err != nil || created.Secret == "" {
		t.Fatalf("POST /admin/keys answered %s (%v), want the secret", b, err)
	}
	return created.Secret
}

// checkLogin checks that cardboxd's sessions log in as the init script's
// role, not as a superuser.
func checkLogin(t *testing.T, role, db string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.SuperuserURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT DISTINCT usename::text FROM pg_stat_activity
		WHERE datname = $1 AND application_name LIKE 'cardboxd/%'`, db)
	if err != nil {
		t.Fatal(err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(users, []string{role}) {
		t.Fatalf("cardboxd's sessions log in as %v, want only %s", users, role)
	}
}
