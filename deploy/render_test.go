package deploy

import (
	"fmt"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// overlays are the Kustomize overlays operators apply, under k8s/overlays.
var overlays = []string{"local", "production"}

// rendered is one overlay's output, every object decoded into its type.
type rendered struct {
	overlay         string
	namespaces      []*corev1.Namespace
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	services        []*corev1.Service
	deployments     []*appsv1.Deployment
	statefulSets    []*appsv1.StatefulSet
	jobs            []*batchv1.Job
	cronJobs        []*batchv1.CronJob
	pdbs            []*policyv1.PodDisruptionBudget
	scaledObjects   []*scaledObject
	triggerAuths    []*triggerAuthentication
	prometheusRules []*prometheusRule
	namespacedNames []string // kind/name of every namespaced object
	namespaceOf     map[string]string
}

// strictDecoder decodes YAML into the Kubernetes API types dubflow uses,
// failing on unknown and duplicate fields.
func strictDecoder() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("build scheme: %v", err))
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
}

// kustomizeBuild renders a kustomization directory with the kustomize
// library pinned in go.mod (the same engine as the kustomize v5.7.1 CLI)
// and returns each object as YAML.
func kustomizeBuild(t *testing.T, dir string) [][]byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var docs [][]byte
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatalf("kustomize build %s: %s as YAML: %v", dir, r.CurId(), err)
		}
		docs = append(docs, b)
	}
	if len(docs) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return docs
}

// render builds an overlay and decodes every object strictly; an object of
// a kind the tests do not know fails the test.
func render(t *testing.T, overlay string) *rendered {
	t.Helper()
	docs := kustomizeBuild(t, filepath.Join("k8s", "overlays", overlay))
	dec := strictDecoder()
	keda := loadKEDASchemas(t)
	out := &rendered{
		overlay:     overlay,
		configMaps:  map[string]*corev1.ConfigMap{},
		secrets:     map[string]*corev1.Secret{},
		namespaceOf: map[string]string{},
	}
	for _, doc := range docs {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(mustJSON(t, doc)); err != nil {
			t.Fatalf("%s: decode object: %v\n%s", overlay, err, doc)
		}
		gvk := u.GroupVersionKind()
		id := gvk.Kind + "/" + u.GetName()
		if gvk.Kind != "Namespace" {
			out.namespacedNames = append(out.namespacedNames, id)
			out.namespaceOf[id] = u.GetNamespace()
		}
		if gvk.Group == kedaGroup {
			obj := keda.decode(t, overlay, gvk, doc)
			switch o := obj.(type) {
			case *scaledObject:
				out.scaledObjects = append(out.scaledObjects, o)
			case *triggerAuthentication:
				out.triggerAuths = append(out.triggerAuths, o)
			}
			continue
		}
		if gvk.Group == monitoringGroup {
			out.prometheusRules = append(out.prometheusRules, decodePrometheusRule(t, overlay, gvk, doc))
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: strict decode %s: %v", overlay, id, err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			out.namespaces = append(out.namespaces, o)
		case *corev1.ConfigMap:
			out.configMaps[o.Name] = o
		case *corev1.Secret:
			out.secrets[o.Name] = o
		case *corev1.Service:
			out.services = append(out.services, o)
		case *appsv1.Deployment:
			out.deployments = append(out.deployments, o)
		case *appsv1.StatefulSet:
			out.statefulSets = append(out.statefulSets, o)
		case *batchv1.Job:
			out.jobs = append(out.jobs, o)
		case *batchv1.CronJob:
			out.cronJobs = append(out.cronJobs, o)
		case *policyv1.PodDisruptionBudget:
			out.pdbs = append(out.pdbs, o)
		default:
			t.Fatalf("%s: %s: kind %s is not checked by these tests", overlay, id, schema.GroupVersionKind(gvk))
		}
	}
	return out
}

// TestStrictDecodeRejectsUnknownFields shows the decoder bites: a typo in
// a Deployment is an error, not a silently dropped field.
func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	doc := []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: asr
spec:
  selector:
    matchLabels: {app: asr}
  template:
    metadata:
      labels: {app: asr}
    spec:
      terminationGracePeriodSecond: 60
      containers:
        - name: asr
          image: dubflow/asr:1
`)
	if _, _, err := strictDecoder().Decode(doc, nil, nil); err == nil {
		t.Fatal("strict decode accepted the unknown field terminationGracePeriodSecond")
	}
}
