package deploy

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// rabbitmqCluster is the part of the RabbitMQ Cluster Operator's
// RabbitmqCluster the tests inspect. The whole object is validated against
// the operator's CRD schema first.
type rabbitmqCluster struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Replicas  *int32 `json:"replicas"`
		Image     string `json:"image"`
		Resources struct {
			Requests map[string]string `json:"requests"`
			Limits   map[string]string `json:"limits"`
		} `json:"resources"`
		Persistence struct {
			Storage string `json:"storage"`
		} `json:"persistence"`
		Rabbitmq struct {
			AdditionalConfig string `json:"additionalConfig"`
		} `json:"rabbitmq"`
		Affinity struct {
			PodAntiAffinity struct {
				Required []struct {
					LabelSelector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					} `json:"labelSelector"`
					TopologyKey string `json:"topologyKey"`
				} `json:"requiredDuringSchedulingIgnoredDuringExecution"`
			} `json:"podAntiAffinity"`
		} `json:"affinity"`
	} `json:"spec"`
}

var rabbitmqClusterGVK = schema.GroupVersionKind{Group: "rabbitmq.com", Version: "v1beta1", Kind: "RabbitmqCluster"}

// TestRabbitmqCluster renders deploy/k8s/rabbitmq, validates its
// RabbitmqCluster against the operator's CRD and checks what dubflow needs
// of the cluster: an odd number of nodes (3 or more) for quorum queues, one
// node per machine, persistent storage, a pinned image, a memory limit equal
// to the request, partition handling that refuses a split brain, and a
// consumer timeout equal to what the services are told
// (BROKER_CONSUMER_TIMEOUT_SECONDS in the base configuration).
func TestRabbitmqCluster(t *testing.T) {
	docs := kustomizeBuild(t, filepath.Join("k8s", "rabbitmq"))
	crds := loadCRDSchemas(t, filepath.Join("testdata", "crds", "rabbitmq"))
	var clusters []rabbitmqCluster
	for _, doc := range docs {
		if err := crds.validate(rabbitmqClusterGVK, doc); err != nil {
			t.Fatalf("RabbitmqCluster against the operator's CRD schema: %v\n%s", err, doc)
		}
		var c rabbitmqCluster
		if err := yaml.Unmarshal(doc, &c); err != nil {
			t.Fatal(err)
		}
		clusters = append(clusters, c)
	}
	if len(clusters) != 1 {
		t.Fatalf("%d objects, want one RabbitmqCluster", len(clusters))
	}
	c := clusters[0]
	if c.Metadata.Namespace != namespace {
		t.Errorf("namespace %q, want %q", c.Metadata.Namespace, namespace)
	}
	if r := c.Spec.Replicas; r == nil || *r < 3 || *r%2 == 0 {
		t.Errorf("replicas %s: want an odd number, at least 3 (a quorum survives a lost node)", fmtReplicas(r))
	}
	if img := c.Spec.Image; img == "" || strings.HasSuffix(img, ":latest") || !strings.Contains(img, ":") {
		t.Errorf("image %q: want a pinned tag", img)
	}
	if req, lim := c.Spec.Resources.Requests["memory"], c.Spec.Resources.Limits["memory"]; req == "" || req != lim {
		t.Errorf("memory request %q, limit %q: want both set and equal (RabbitMQ sizes its watermark from the limit)", req, lim)
	}
	if c.Spec.Persistence.Storage == "" {
		t.Error("no persistence.storage: quorum queues need their data to outlive a pod")
	}
	checkRabbitmqConfig(t, c.Spec.Rabbitmq.AdditionalConfig)
	checkOneNodePerMachine(t, c)
}

func checkRabbitmqConfig(t *testing.T, conf string) {
	t.Helper()
	settings := map[string]string{}
	for _, line := range strings.Split(conf, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if got := settings["cluster_partition_handling"]; got != "pause_minority" {
		t.Errorf("cluster_partition_handling = %q, want pause_minority", got)
	}
	want := readEnvFile(t, filepath.Join("k8s", "base", "config.env"))["BROKER_CONSUMER_TIMEOUT_SECONDS"] + "000"
	if got := settings["consumer_timeout"]; got != want {
		t.Errorf("consumer_timeout = %q ms, want %s ms: BROKER_CONSUMER_TIMEOUT_SECONDS in k8s/base/config.env must say what the broker has", got, want)
	}
}

func checkOneNodePerMachine(t *testing.T, c rabbitmqCluster) {
	t.Helper()
	for _, term := range c.Spec.Affinity.PodAntiAffinity.Required {
		// The operator labels the pods app.kubernetes.io/name=<cluster name>.
		if term.TopologyKey == "kubernetes.io/hostname" && term.LabelSelector.MatchLabels["app.kubernetes.io/name"] == c.Metadata.Name {
			return
		}
	}
	t.Errorf("no required pod anti-affinity on kubernetes.io/hostname for the pods of %s", c.Metadata.Name)
}

func fmtReplicas(r *int32) string {
	if r == nil {
		return "unset"
	}
	return fmt.Sprint(*r)
}
