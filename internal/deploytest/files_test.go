package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"gopkg.in/yaml.v3"
)

// root is the repository, where the Dockerfile and docker-compose.yml are.
const root = "../.."

// image is what the Dockerfile's final stage gives a container: its
// environment, command line, user and health check; and what the stages
// before it run (the build).
type image struct {
	env         [][2]string // ENV, in order
	entrypoint  []string
	cmd         []string
	user        string
	healthcheck []string // HEALTHCHECK CMD, exec form
	copies      []string // COPY lines of the final stage
	buildRuns   []string // RUN lines of the stages before it
}

// readDockerfile reads the instructions of the Dockerfile that matter to
// running its image. ENTRYPOINT, CMD and HEALTHCHECK must use the exec
// form (a JSON array): a shell form would need a shell in the image and
// would not pass on signals.
func readDockerfile(t *testing.T, file string) image {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var img image
	var earlierRuns, runs []string
	stage := -1
	for _, line := range logicalLines(string(b)) {
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(word) {
		case "FROM":
			stage++
			earlierRuns = append(earlierRuns, runs...)
			img, runs = image{}, nil
		case "RUN":
			runs = append(runs, rest)
		case "ENV":
			img.env = append(img.env, parseEnv(t, rest)...)
		case "ENTRYPOINT":
			img.entrypoint = execForm(t, "ENTRYPOINT", rest)
		case "CMD":
			img.cmd = execForm(t, "CMD", rest)
		case "USER":
			img.user = rest
		case "COPY":
			img.copies = append(img.copies, rest)
		case "HEALTHCHECK":
			fields := strings.Fields(rest)
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				fields = fields[1:]
			}
			if len(fields) == 0 || strings.ToUpper(fields[0]) != "CMD" {
				t.Fatalf("%s: HEALTHCHECK %s: want HEALTHCHECK [--options] CMD [...]", file, rest)
			}
			_, cmd, _ := strings.Cut(rest, fields[0])
			img.healthcheck = execForm(t, "HEALTHCHECK CMD", strings.TrimSpace(cmd))
		}
	}
	if stage < 0 {
		t.Fatalf("%s: no FROM", file)
	}
	// The final stage's own RUN lines are not the build's.
	img.buildRuns = earlierRuns
	return img
}

// logicalLines joins continued lines and drops comments, as docker does.
func logicalLines(text string) []string {
	var out []string
	var cur strings.Builder
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

// parseEnv reads ENV's KEY=VALUE pairs (values may be double-quoted), or
// the old form ENV KEY VALUE.
func parseEnv(t *testing.T, rest string) [][2]string {
	t.Helper()
	var words []string
	var cur strings.Builder
	quoted := false
	for _, r := range rest {
		switch {
		case r == '"':
			quoted = !quoted
		case unicode.IsSpace(r) && !quoted:
			if cur.Len() > 0 {
				words = append(words, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		t.Fatalf("ENV without a variable")
	}
	if !strings.Contains(words[0], "=") {
		key, value, _ := strings.Cut(rest, " ")
		return [][2]string{{key, strings.TrimSpace(value)}}
	}
	var env [][2]string
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			t.Fatalf("ENV %s: %q is not KEY=VALUE", rest, w)
		}
		env = append(env, [2]string{k, v})
	}
	return env
}

func execForm(t *testing.T, what, rest string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(rest), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("%s %s: want the exec form, a JSON array of strings (%v)", what, rest, err)
	}
	return argv
}

// composeFile is the part of docker-compose.yml the tests read; the
// schema test checks every key against the compose spec.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image       string   `yaml:"image"`
	Build       any      `yaml:"build"`
	Entrypoint  any      `yaml:"entrypoint"`
	Command     any      `yaml:"command"`
	Environment any      `yaml:"environment"`
	Secrets     []any    `yaml:"secrets"`
	Volumes     []string `yaml:"volumes"`
	Ports       []string `yaml:"ports"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

// readCompose reads docker-compose.yml with its ${VAR:-default}
// interpolated as compose does when none of the variables is set.
func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal([]byte(interpolate(t, string(b))), &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return f
}

var variable = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// interpolate replaces compose's variables with their defaults (none is
// set); $$ is a dollar. A required variable (${VAR:?message}) fails.
func interpolate(t *testing.T, text string) string {
	t.Helper()
	return variable.ReplaceAllStringFunc(text, func(m string) string {
		if m == "$$" {
			return "$"
		}
		g := variable.FindStringSubmatch(m)
		switch {
		case strings.HasSuffix(g[2], "-"):
			return g[3]
		case strings.HasSuffix(g[2], "?"):
			t.Fatalf("docker-compose.yml requires %s to be set (%s)", g[1], g[3])
		}
		return ""
	})
}

// service returns the named service or fails.
func (f composeFile) service(t *testing.T, name string) composeService {
	t.Helper()
	s, ok := f.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %q", name)
	}
	return s
}

// argv is a service's entrypoint or command in the exec form; nil when
// unset.
func argv(t *testing.T, what string, v any) []string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]string, len(v))
		for i, a := range v {
			s, ok := a.(string)
			if !ok {
				t.Fatalf("%s: %v is not a string", what, a)
			}
			out[i] = s
		}
		return out
	default:
		t.Fatalf("%s: %v: want a list (the exec form), not a shell command", what, v)
		return nil
	}
}

// environment is a service's environment: a map, or a list of KEY=VALUE.
// A key without a value passes the host's variable through, which the
// tests do not use: it is an error here.
func (s composeService) environment(t *testing.T) [][2]string {
	t.Helper()
	var env [][2]string
	switch e := s.Environment.(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			if v == nil {
				t.Fatalf("environment %s has no value", k)
			}
			env = append(env, [2]string{k, fmt.Sprint(v)})
		}
	case []any:
		for _, kv := range e {
			k, v, ok := strings.Cut(fmt.Sprint(kv), "=")
			if !ok {
				t.Fatalf("environment %v has no value", kv)
			}
			env = append(env, [2]string{k, v})
		}
	default:
		t.Fatalf("environment: %T", s.Environment)
	}
	return env
}

// secretPaths maps each secret the service mounts to its path in the
// container (/run/secrets/NAME unless a target says otherwise).
func (s composeService) secretPaths(t *testing.T) map[string]string {
	t.Helper()
	paths := map[string]string{}
	for _, e := range s.Secrets {
		switch e := e.(type) {
		case string:
			paths[e] = "/run/secrets/" + e
		case map[string]any:
			src, _ := e["source"].(string)
			target, _ := e["target"].(string)
			switch {
			case target == "":
				target = "/run/secrets/" + src
			case !path.IsAbs(target):
				target = "/run/secrets/" + target
			}
			paths[src] = target
		default:
			t.Fatalf("secrets entry %v", e)
		}
	}
	return paths
}

// mount is a short-syntax volume: SOURCE:TARGET[:MODE].
type mount struct{ source, target, mode string }

func (s composeService) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 {
			t.Fatalf("volume %q: want SOURCE:TARGET[:MODE]", v)
		}
		m := mount{source: parts[0], target: parts[1]}
		if len(parts) == 3 {
			m.mode = parts[2]
		}
		out = append(out, m)
	}
	return out
}

// published is a short-syntax port: HOST_IP:HOST_PORT:CONTAINER_PORT.
type published struct{ hostIP, hostPort, containerPort string }

func (s composeService) published(t *testing.T) []published {
	t.Helper()
	var out []published
	for _, p := range s.Ports {
		parts := strings.Split(p, ":")
		if len(parts) != 3 {
			t.Fatalf("port %q: publish with an explicit host address (HOST_IP:HOST_PORT:CONTAINER_PORT), "+
				"else docker publishes it on every interface", p)
		}
		out = append(out, published{parts[0], parts[1], parts[2]})
	}
	return out
}

// lookup returns the last value of key in env.
func lookup(env [][2]string, key string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if kv[0] == key {
			v, ok = kv[1], true
		}
	}
	return v, ok
}
