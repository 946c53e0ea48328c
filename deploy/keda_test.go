package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

const kedaGroup = "keda.sh"

// scaledObject is the part of KEDA's ScaledObject the tests inspect. The
// whole object is validated against KEDA's CRD schema first.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

// triggerAuthentication is the part of KEDA's TriggerAuthentication the
// tests inspect.
type triggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}

// kedaSchemas validates KEDA objects against the CRDs in testdata/crds.
type kedaSchemas map[schema.GroupVersionKind]*jsonschema.Schema

// loadKEDASchemas compiles the openAPIV3Schema of every served version of
// the CRDs in testdata/crds into JSON Schemas that also reject unknown
// fields (Kubernetes would prune them silently; here they are mistakes).
func loadKEDASchemas(t *testing.T) kedaSchemas {
	t.Helper()
	return loadCRDSchemas(t, filepath.Join("testdata", "crds"))
}

// loadCRDSchemas compiles the CRDs of the YAML files in dir (see
// loadKEDASchemas).
func loadCRDSchemas(t *testing.T, dir string) kedaSchemas {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("CRDs in %s: %v (found %d)", dir, err, len(files))
	}
	out := kedaSchemas{}
	c := jsonschema.NewCompiler()
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read CRD: %v", err)
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Served bool   `json:"served"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("decode CRD %s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			url := "mem://crd/" + strings.ToLower(gvk.Kind) + "/" + v.Name + ".json"
			if err := c.AddResource(url, toJSONSchema(v.Schema.OpenAPIV3Schema)); err != nil {
				t.Fatalf("add schema %s: %v", url, err)
			}
			sch, err := c.Compile(url)
			if err != nil {
				t.Fatalf("compile schema %s: %v", url, err)
			}
			out[gvk] = sch
		}
	}
	return out
}

// toJSONSchema turns a CRD structural schema into a JSON Schema: objects
// with declared properties allow no others (unless they preserve unknown
// fields), nullable adds null, int-or-string drops the type.
func toJSONSchema(node any) any {
	switch n := node.(type) {
	case map[string]any:
		out := make(map[string]any, len(n)+1)
		for k, v := range n {
			if strings.HasPrefix(k, "x-kubernetes-") || k == "nullable" {
				continue
			}
			out[k] = toJSONSchema(v)
		}
		if n["x-kubernetes-int-or-string"] == true {
			delete(out, "type")
		}
		if n["nullable"] == true {
			if typ, ok := out["type"].(string); ok {
				out["type"] = []any{typ, "null"}
			}
		}
		_, hasProps := n["properties"]
		_, hasAdditional := n["additionalProperties"]
		if hasProps && !hasAdditional && n["x-kubernetes-preserve-unknown-fields"] != true {
			out["additionalProperties"] = false
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = toJSONSchema(v)
		}
		return out
	default:
		return node
	}
}

// validate checks one KEDA object (YAML) against its CRD schema and its
// metadata strictly against ObjectMeta.
func (k kedaSchemas) validate(gvk schema.GroupVersionKind, doc []byte) error {
	sch, ok := k[gvk]
	if !ok {
		return &unknownKindError{gvk: gvk}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSONBytes(doc)))
	if err != nil {
		return err
	}
	if m, ok := inst.(map[string]any); ok {
		meta, err := json.Marshal(m["metadata"])
		if err != nil {
			return err
		}
		var om metav1.ObjectMeta
		if err := yaml.UnmarshalStrict(meta, &om); err != nil {
			return err
		}
	}
	return sch.Validate(inst)
}

type unknownKindError struct{ gvk schema.GroupVersionKind }

func (e *unknownKindError) Error() string { return "no CRD schema for " + e.gvk.String() }

// decode validates and decodes a KEDA object into its test struct.
func (k kedaSchemas) decode(t *testing.T, overlay string, gvk schema.GroupVersionKind, doc []byte) any {
	t.Helper()
	if err := k.validate(gvk, doc); err != nil {
		t.Fatalf("%s: %s against KEDA's CRD schema: %v\n%s", overlay, gvk.Kind, err, doc)
	}
	var obj any
	switch gvk.Kind {
	case "ScaledObject":
		obj = &scaledObject{}
	case "TriggerAuthentication":
		obj = &triggerAuthentication{}
	default:
		t.Fatalf("%s: KEDA kind %s is not checked by these tests", overlay, gvk.Kind)
	}
	if err := yaml.Unmarshal(doc, obj); err != nil {
		t.Fatalf("%s: decode %s: %v", overlay, gvk.Kind, err)
	}
	return obj
}

func mustJSONBytes(doc []byte) []byte {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		panic(err)
	}
	return j
}

func mustJSON(t *testing.T, doc []byte) []byte {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("YAML to JSON: %v", err)
	}
	return j
}

// TestKEDASchemaRejectsMistakes shows the CRD validation bites: an unknown
// field, a wrong type and a missing required field are each an error.
func TestKEDASchemaRejectsMistakes(t *testing.T) {
	k := loadKEDASchemas(t)
	gvk := schema.GroupVersionKind{Group: kedaGroup, Version: "v1alpha1", Kind: "ScaledObject"}
	good := `apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: asr}
spec:
  scaleTargetRef: {name: asr}
  minReplicaCount: 1
  triggers:
    - type: rabbitmq
      metadata: {queueName: task.asr, mode: QueueLength, value: "1"}
`
	if err := k.validate(gvk, []byte(good)); err != nil {
		t.Fatalf("valid ScaledObject rejected: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":      strings.Replace(good, "minReplicaCount: 1", "minReplicas: 1", 1),
		"wrong type":         strings.Replace(good, "minReplicaCount: 1", "minReplicaCount: one", 1),
		"missing target":     strings.Replace(good, "  scaleTargetRef: {name: asr}\n", "", 1),
		"metadata not map":   strings.Replace(good, `metadata: {queueName: task.asr, mode: QueueLength, value: "1"}`, "metadata: [task.asr]", 1),
		"unknown meta field": strings.Replace(good, "metadata: {name: asr}", "metadata: {name: asr, label: x}", 1),
	} {
		if err := k.validate(gvk, []byte(doc)); err == nil {
			t.Errorf("%s: accepted\n%s", name, doc)
		}
	}
}
