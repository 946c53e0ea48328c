package deploy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// cnpgCluster is a CloudNativePG Cluster (postgresql.cnpg.io/v1) as far
// as dubflow's manifest uses it. The operator's CRD is not vendored (its
// Go module is not available to this build), so the manifest is decoded
// strictly into these fields, named as in the operator's API reference:
// a misspelt or misplaced field fails the decode.
type cnpgCluster struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Instances             int    `json:"instances"`
		ImageName             string `json:"imageName"`
		PrimaryUpdateStrategy string `json:"primaryUpdateStrategy"`
		PostgreSQL            struct {
			Synchronous *struct {
				Method string `json:"method"`
				Number int    `json:"number"`
			} `json:"synchronous"`
			Parameters map[string]string `json:"parameters"`
		} `json:"postgresql"`
		Bootstrap struct {
			InitDB struct {
				Database string `json:"database"`
				Owner    string `json:"owner"`
			} `json:"initdb"`
		} `json:"bootstrap"`
		Storage struct {
			Size string `json:"size"`
		} `json:"storage"`
		Resources corev1.ResourceRequirements `json:"resources"`
		Affinity  struct {
			EnablePodAntiAffinity *bool  `json:"enablePodAntiAffinity"`
			PodAntiAffinityType   string `json:"podAntiAffinityType"`
			TopologyKey           string `json:"topologyKey"`
		} `json:"affinity"`
	} `json:"spec"`
}

// TestPostgresCluster renders deploy/k8s/postgres and checks what the
// README's synchronous mode needs of it: a primary and at least two
// standbys, one of them synchronous (so a failover loses no acknowledged
// commit, and losing any one server leaves a synchronous pair), one server
// per machine, the dubflow database, persistent storage, a pinned image.
func TestPostgresCluster(t *testing.T) {
	docs := kustomizeBuild(t, filepath.Join("k8s", "postgres"))
	if len(docs) != 1 {
		t.Fatalf("%d objects, want one Cluster", len(docs))
	}
	var c cnpgCluster
	if err := yaml.UnmarshalStrict(docs[0], &c); err != nil {
		t.Fatalf("Cluster: %v\n%s", err, docs[0])
	}
	s := c.Spec
	if c.APIVersion != "postgresql.cnpg.io/v1" || c.Kind != "Cluster" || c.Metadata.Namespace != namespace {
		t.Errorf("%s %s in %q, want a postgresql.cnpg.io/v1 Cluster in %q", c.APIVersion, c.Kind, c.Metadata.Namespace, namespace)
	}
	if s.Instances < 3 {
		t.Errorf("instances %d: want a primary and at least two standbys", s.Instances)
	}
	if sync := s.PostgreSQL.Synchronous; sync == nil || sync.Number < 1 || sync.Number > s.Instances-2 ||
		(sync.Method != "any" && sync.Method != "first") {
		t.Errorf("postgresql.synchronous %+v: want method any or first, 1 to instances-2 standbys (a synchronous pair survives a lost server)", sync)
	}
	checkImage(t, "Cluster/"+c.Metadata.Name, s.ImageName)
	if s.Bootstrap.InitDB.Database != "dubflow" || s.Storage.Size == "" {
		t.Errorf("bootstrap database %q, storage %q: want dubflow and a size", s.Bootstrap.InitDB.Database, s.Storage.Size)
	}
	checkResources(t, "Cluster/"+c.Metadata.Name, s.Resources)
	if a := s.Affinity; a.EnablePodAntiAffinity == nil || !*a.EnablePodAntiAffinity ||
		a.PodAntiAffinityType != "required" || a.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("affinity %+v: want required pod anti-affinity on kubernetes.io/hostname (one server per machine)", a)
	}
	if n, err := strconv.Atoi(s.PostgreSQL.Parameters["max_connections"]); err != nil || n < 200 {
		t.Errorf("max_connections %q: want the services' pools' budget (at least 200)", s.PostgreSQL.Parameters["max_connections"])
	}
}

// minioObjects are what deploy/k8s/minio renders.
type minioObjects struct {
	set      *appsv1.StatefulSet
	services map[string]*corev1.Service
	pdb      *policyv1.PodDisruptionBudget
}

func renderMinio(t *testing.T) minioObjects {
	t.Helper()
	dec := strictDecoder()
	out := minioObjects{services: map[string]*corev1.Service{}}
	for _, doc := range kustomizeBuild(t, filepath.Join("k8s", "minio")) {
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, doc)
		}
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			out.set = o
		case *corev1.Service:
			out.services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			out.pdb = o
		default:
			t.Fatalf("unexpected %T", obj)
		}
	}
	if out.set == nil || out.pdb == nil {
		t.Fatal("want a StatefulSet and a PodDisruptionBudget")
	}
	return out
}

// serverArg matches MinIO's distributed endpoint with its pods' range.
var serverArg = regexp.MustCompile(`^http://([a-z0-9-]+)-\{0\.\.\.(\d+)\}\.([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local(/\S+)$`)

// TestMinioDistributed renders deploy/k8s/minio: MinIO in distributed
// mode, one erasure set of 4 or more servers with a drive each, whose
// endpoint list names exactly the StatefulSet's pods through its headless
// Service, one server per machine, at most one away at a time (the set's
// write quorum), probes on MinIO's health endpoints, restricted pods.
func TestMinioDistributed(t *testing.T) {
	m := renderMinio(t)
	s, id := m.set, "StatefulSet/"+m.set.Name
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	if replicas < 4 || s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("%s: replicas %d, podManagementPolicy %q: want 4 or more, started in parallel", id, replicas, s.Spec.PodManagementPolicy)
	}
	// The pod rules every dubflow pod meets (restricted, pinned image,
	// resources); dubflow-minio is the operator's Secret.
	r := &rendered{overlay: "production", secrets: map[string]*corev1.Secret{"dubflow-minio": {
		Data: map[string][]byte{"MINIO_ROOT_USER": nil, "MINIO_ROOT_PASSWORD": nil}}}}
	r.checkPod(t, id, s.Spec.Template)
	checkSelector(t, id, s.Spec.Selector, s.Spec.Template.Labels)
	c := s.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	match := serverArg.FindStringSubmatch(c.Args[1])
	if len(match) == 0 || match[1] != s.Name || match[2] != fmt.Sprint(replicas-1) || match[3] != s.Spec.ServiceName || match[4] != namespace {
		t.Fatalf("%s: args %q: want server http://%s-{0...%d}.%s.%s.svc.cluster.local/<drive>", id, args, s.Name, replicas-1, s.Spec.ServiceName, namespace)
	}
	if hl := m.services[s.Spec.ServiceName]; hl == nil || hl.Spec.ClusterIP != corev1.ClusterIPNone || !hl.Spec.PublishNotReadyAddresses {
		t.Errorf("%s: Service %s must be headless and publish not-ready pods (the servers find each other before they are ready)", id, s.Spec.ServiceName)
	}
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || (vm.MountPath == match[5] && len(s.Spec.VolumeClaimTemplates) == 1 && vm.Name == s.Spec.VolumeClaimTemplates[0].Name)
	}
	if !mounted {
		t.Errorf("%s: the drive %s is not a volume claim template's mount", id, match[5])
	}
	checkMinioProbes(t, id, c)
	checkMinioAvailability(t, m)
}

func checkMinioProbes(t *testing.T, id string, c corev1.Container) {
	t.Helper()
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/minio/health/live" {
		t.Errorf("%s: liveness probe is not /minio/health/live", id)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/minio/health/ready" {
		t.Errorf("%s: readiness probe is not /minio/health/ready", id)
	}
}

// checkMinioAvailability: one server per machine, at most one away at a
// time, and a Service for the clients.
func checkMinioAvailability(t *testing.T, m minioObjects) {
	t.Helper()
	sel := m.set.Spec.Template.Labels
	required := false
	if a := m.set.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			required = required || (term.TopologyKey == "kubernetes.io/hostname" && term.LabelSelector != nil &&
				term.LabelSelector.MatchLabels["app.kubernetes.io/name"] == sel["app.kubernetes.io/name"])
		}
	}
	if !required {
		t.Error("MinIO: no required pod anti-affinity on kubernetes.io/hostname (one server per machine)")
	}
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget/%s: maxUnavailable %v, want 1 (the set keeps its write quorum)", m.pdb.Name, mu)
	}
	if svc := m.services["minio"]; svc == nil || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Error("MinIO: no Service minio for the clients (S3_ENDPOINT)")
	}
}
