package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// There is no Kubernetes cluster, Prometheus or Grafana here: these tests
// check that the files under deploy/ parse, hang together, and name only
// settings shale has and series docs/metrics.md documents.

// shaleSettings are the environment variables shale reads: SHALE_ and each
// flag its --help lists.
func shaleSettings(t *testing.T) map[string]bool {
	t.Helper()
	shale, _ := binaries(t)
	out, _ := exec.Command(shale, "--help").CombinedOutput()
	env := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		env["SHALE_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
	}
	if !env["SHALE_DATA_DIR"] || !env["SHALE_INITIAL_CLUSTER"] {
		t.Fatalf("shale --help lists no settings:\n%s", out)
	}
	return env
}

func readDeploy(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRootPath(), "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocs decodes every document of a YAML stream.
func yamlDocs(t *testing.T, rel string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readDeploy(t, rel)))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("deploy/%s: %v", rel, err)
		}
		docs = append(docs, d)
	}
}

// dig follows a path of map keys and list indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestK8sManifest(t *testing.T) {
	settings := shaleSettings(t)
	byKind := map[string][]map[string]any{}
	for _, d := range yamlDocs(t, "k8s/shale.yaml") {
		kind, _ := d["kind"].(string)
		byKind[kind] = append(byKind[kind], d)
	}
	if len(byKind["StatefulSet"]) != 1 || len(byKind["PodDisruptionBudget"]) != 1 || len(byKind["Service"]) < 1 {
		t.Fatalf("want a StatefulSet, a PodDisruptionBudget and Services; got %v", keysOf(byKind))
	}
	sts := byKind["StatefulSet"][0]
	labels, _ := dig(sts, "spec", "template", "metadata", "labels").(map[string]any)
	matches := func(sel any) bool {
		m, _ := sel.(map[string]any)
		for k, v := range m {
			if labels[k] != v {
				return false
			}
		}
		return len(m) > 0
	}
	if !matches(dig(sts, "spec", "selector", "matchLabels")) {
		t.Errorf("StatefulSet selector %v does not match its pods' labels %v", dig(sts, "spec", "selector"), labels)
	}
	var headless map[string]any
	for _, s := range byKind["Service"] {
		if dig(s, "metadata", "name") == dig(sts, "spec", "serviceName") {
			headless = s
		}
		if !matches(dig(s, "spec", "selector")) {
			t.Errorf("Service %v selects no pod of the StatefulSet", dig(s, "metadata", "name"))
		}
	}
	if headless == nil || dig(headless, "spec", "clusterIP") != "None" {
		t.Errorf("the StatefulSet's serviceName %v is not a headless Service", dig(sts, "spec", "serviceName"))
	}
	if !matches(dig(byKind["PodDisruptionBudget"][0], "spec", "selector", "matchLabels")) {
		t.Errorf("the PodDisruptionBudget selects no pod of the StatefulSet")
	}
	c := dig(sts, "spec", "template", "spec", "containers", 0)
	if dig(c, "readinessProbe", "httpGet", "path") != "/healthz" {
		t.Errorf("readiness probe = %v, want httpGet /healthz", dig(c, "readinessProbe"))
	}
	probePort := dig(c, "readinessProbe", "httpGet", "port")
	ports, _ := dig(c, "ports").([]any)
	var httpPort any
	for _, p := range ports {
		if dig(p, "name") == probePort {
			httpPort = dig(p, "containerPort")
		}
	}
	if httpPort != 7380 {
		t.Errorf("the readiness probe's port %v is not the container's HTTP port 7380", probePort)
	}
	replicas, _ := dig(sts, "spec", "replicas").(int)
	env, _ := dig(c, "env").([]any)
	for _, e := range env {
		name, _ := dig(e, "name").(string)
		if strings.HasPrefix(name, "SHALE_") && !settings[name] {
			t.Errorf("container env %s is not a shale setting", name)
		}
		if name == "SHALE_INITIAL_CLUSTER" {
			members := strings.Split(dig(e, "value").(string), ",")
			if len(members) != replicas {
				t.Errorf("SHALE_INITIAL_CLUSTER has %d members for %d replicas", len(members), replicas)
			}
			// The pod's advertised address must be its own entry.
			for _, e2 := range env {
				if dig(e2, "name") == "SHALE_ADVERTISE" && dig(e2, "value") != "$(POD_NAME).shale.$(POD_NAMESPACE).svc:7379" {
					t.Errorf("SHALE_ADVERTISE = %v, not the form of the initial cluster's entries", dig(e2, "value"))
				}
			}
			for i, m := range members {
				want := "=" + dig(sts, "metadata", "name").(string) + "-" + string(rune('0'+i)) + "." +
					dig(sts, "spec", "serviceName").(string) + ".$(POD_NAMESPACE).svc:7379"
				if !strings.HasSuffix(m, want) {
					t.Errorf("member %q is not pod %d's headless DNS name (%s)", m, i, want)
				}
			}
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestComposeFiles(t *testing.T) {
	settings := shaleSettings(t)
	for file, n := range map[string]int{"docker-compose.yml": 3, "docker-compose-5.yml": 5} {
		docs := yamlDocs(t, file)
		services, _ := dig(docs[0], "services").(map[string]any)
		if len(services) != n {
			t.Errorf("%s: %d services, want %d", file, len(services), n)
		}
		volumes, _ := dig(docs[0], "volumes").(map[string]any)
		seenListen := map[string]bool{}
		for name, svc := range services {
			env, _ := dig(svc, "environment").(map[string]any)
			for k := range env {
				if !settings[k] {
					t.Errorf("%s: %s sets %s, which is not a shale setting", file, name, k)
				}
			}
			id, _ := env["SHALE_NODE_ID"].(string)
			listen, _ := env["SHALE_LISTEN"].(string)
			httpAddr, _ := env["SHALE_HTTP"].(string)
			initial, _ := env["SHALE_INITIAL_CLUSTER"].(string)
			if id == "" || listen == "" || httpAddr == "" {
				t.Errorf("%s: %s lacks SHALE_NODE_ID, SHALE_LISTEN or SHALE_HTTP", file, name)
			}
			// Host networking: the listen address is the advertised one,
			// so it must be this node's entry of the initial cluster.
			if !slices.Contains(strings.Split(initial, ","), id+"="+listen) {
				t.Errorf("%s: %s listens on %s, which is not node %s's entry in %s", file, name, listen, id, initial)
			}
			if seenListen[listen] || seenListen[httpAddr] {
				t.Errorf("%s: %s reuses an address of another node (%s, %s)", file, name, listen, httpAddr)
			}
			seenListen[listen], seenListen[httpAddr] = true, true
			test, _ := dig(svc, "healthcheck", "test").([]any)
			if len(test) == 0 || test[len(test)-1] != httpAddr {
				t.Errorf("%s: %s's health check %v does not check its own HTTP address %s", file, name, test, httpAddr)
			}
			vols, _ := dig(svc, "volumes").([]any)
			for _, v := range vols {
				vol, _, _ := strings.Cut(v.(string), ":")
				if _, ok := volumes[vol]; !ok {
					t.Errorf("%s: %s mounts undeclared volume %s", file, name, vol)
				}
			}
		}
	}
	for _, line := range strings.Split(string(readDeploy(t, "docker/Dockerfile")), "\n") {
		for _, m := range regexp.MustCompile(`\b(SHALE_[A-Z_]+)=`).FindAllStringSubmatch(line, -1) {
			if !settings[m[1]] && m[1] != "SHALE_ENDPOINTS" { // SHALE_ENDPOINTS is shalectl's
				t.Errorf("Dockerfile sets %s, which is not a shale setting", m[1])
			}
		}
	}
}

// documentedSeries reads docs/metrics.md: name -> type.
func documentedSeries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRootPath(), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if cols := strings.Split(line, "|"); strings.HasPrefix(line, "| `") && len(cols) > 3 {
			out[strings.Trim(strings.TrimSpace(cols[1]), "`")] = strings.TrimSpace(cols[2])
		}
	}
	return out
}

// checkSeries fails for every series expr names that docs/metrics.md does
// not document (histograms may be used through _bucket, _count, _sum).
func checkSeries(t *testing.T, where, expr string, doc map[string]string) int {
	t.Helper()
	n := 0
	for _, name := range regexp.MustCompile(`\b(?:shale|grpc_server|go|process)_[a-z0-9_]+`).FindAllString(expr, -1) {
		n++
		if doc[name] != "" {
			continue
		}
		base := regexp.MustCompile(`_(bucket|count|sum)$`).ReplaceAllString(name, "")
		if doc[base] == "histogram" || doc[base] == "summary" {
			continue
		}
		t.Errorf("%s uses %s, which docs/metrics.md does not document", where, name)
	}
	return n
}

func TestMonitoringFiles(t *testing.T) {
	doc := documentedSeries(t)
	prom := yamlDocs(t, "prometheus/prometheus.yml")[0]
	if dig(prom, "scrape_configs", 0, "metrics_path") != "/metrics" {
		t.Errorf("prometheus.yml: first scrape config = %v", dig(prom, "scrape_configs", 0))
	}
	rules := yamlDocs(t, "prometheus/shale-alerts.yml")[0]
	groups, _ := dig(rules, "groups").([]any)
	for _, g := range groups {
		rs, _ := dig(g, "rules").([]any)
		for _, r := range rs {
			checkSeries(t, "alert "+dig(r, "alert").(string), dig(r, "expr").(string), doc)
		}
	}

	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(readDeploy(t, "grafana/shale-dashboard.json"), &dash); err != nil {
		t.Fatalf("grafana/shale-dashboard.json: %v", err)
	}
	used := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			used += checkSeries(t, "dashboard panel "+p.Title, tg.Expr, doc)
		}
	}
	if used < 30 {
		t.Errorf("the dashboard uses %d series references; the file did not parse as expected", used)
	}
}
