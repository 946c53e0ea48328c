package deploy

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Names every overlay shares.
const (
	namespace      = "dubflow"
	configName     = "dubflow-config"
	credentials    = "dubflow-credentials"
	metricsService = "dubflow-metrics"
	opsPortName    = "ops"
)

// credentialVars must come from a Secret, never from a ConfigMap or a literal.
var credentialVars = []string{"AMQP_URL", "DATABASE_URL", "S3_ACCESS_KEY", "S3_SECRET_KEY"}

// externalSecrets are created by the operator in production (deploy/README.md).
var externalSecrets = []string{"dubflow-credentials", "dubflow-dispatcher", "dubflow-console", "dubflow-engines", "dubflow-presign"}

// TestOverlays renders every overlay, decodes each object strictly and
// checks the deployment rules on it: every service covered, one namespace,
// and each workload's pod, probes, image, resources and selector.
func TestOverlays(t *testing.T) {
	for _, overlay := range overlays {
		t.Run(overlay, func(t *testing.T) {
			r := render(t, overlay)
			r.checkCoverage(t)
			r.checkNamespaces(t)
			for _, d := range r.deployments {
				r.checkDeployment(t, d)
			}
			for _, j := range r.jobs {
				r.checkDubflowPod(t, "Job/"+j.Name, j.Name, "Job", j.Spec.Template)
				if j.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyAlways {
					t.Errorf("Job/%s: restartPolicy Always is not allowed for a Job", j.Name)
				}
			}
			for _, c := range r.cronJobs {
				r.checkDubflowPod(t, "CronJob/"+c.Name, c.Name, "CronJob", c.Spec.JobTemplate.Spec.Template)
				if c.Spec.ConcurrencyPolicy != "Forbid" {
					t.Errorf("CronJob/%s: concurrencyPolicy %q, want Forbid (runs must not overlap)", c.Name, c.Spec.ConcurrencyPolicy)
				}
			}
			for _, s := range r.statefulSets {
				r.checkPod(t, "StatefulSet/"+s.Name, s.Spec.Template)
				checkSelector(t, "StatefulSet/"+s.Name, s.Spec.Selector, s.Spec.Template.Labels)
			}
			r.checkServices(t)
			r.checkMigratePrerequisites(t)
			r.checkScaledObjectsTargetDeployments(t)
			r.checkOverlay(t)
		})
	}
}

// checkCoverage: every deployable of the services table is rendered once,
// with the kind the table says.
func (r *rendered) checkCoverage(t *testing.T) {
	count := map[string]int{}
	for _, d := range r.deployments {
		count["Deployment/"+d.Name]++
	}
	for _, j := range r.jobs {
		count["Job/"+j.Name]++
	}
	for _, c := range r.cronJobs {
		count["CronJob/"+c.Name]++
	}
	for _, s := range services {
		if s.kind == "" {
			continue
		}
		if n := count[s.kind+"/"+s.object]; n != 1 {
			t.Errorf("%s/%s (service %s) rendered %d times, want 1", s.kind, s.object, s.name, n)
		}
	}
	for id := range count {
		kind, name, _ := strings.Cut(id, "/")
		if _, ok := serviceByObject(kind, name); !ok {
			t.Errorf("%s is not a dubflow service of the services table", id)
		}
	}
	if r.configMap(configName) == nil {
		t.Errorf("ConfigMap %s is not rendered", configName)
	}
}

func (r *rendered) checkNamespaces(t *testing.T) {
	if len(r.namespaces) != 1 || r.namespaces[0].Name != namespace {
		t.Fatalf("want exactly the Namespace %q, got %d namespaces", namespace, len(r.namespaces))
	}
	if got := r.namespaces[0].Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("Namespace %s: pod-security enforce %q, want restricted", namespace, got)
	}
	for _, id := range r.namespacedNames {
		if ns := r.namespaceOf[id]; ns != namespace {
			t.Errorf("%s: namespace %q, want %q", id, ns, namespace)
		}
		_, name, _ := strings.Cut(id, "/")
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			t.Errorf("%s: name: %s", id, msg)
		}
	}
}

// checkDeployment applies the per-worker rules: probes, non-root, grace
// period above the step timeout, resources, a PodDisruptionBudget and,
// for queue consumers, a KEDA ScaledObject on the right queue.
func (r *rendered) checkDeployment(t *testing.T, d *appsv1.Deployment) {
	id := "Deployment/" + d.Name
	svc, ok := serviceByObject("Deployment", d.Name)
	if !ok {
		return // reported by checkCoverage
	}
	tmpl := d.Spec.Template
	checkSelector(t, id, d.Spec.Selector, tmpl.Labels)
	r.checkDubflowPod(t, id, d.Name, "Deployment", tmpl)
	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", id, len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	env, _ := r.env(c)

	// Probes on the ops port: /healthz for liveness, /readyz for readiness.
	opsPort := portOf(t, id, env["OPS_ADDR"], "OPS_ADDR")
	checkProbe(t, id, "liveness", c.LivenessProbe, "/healthz", c, opsPort)
	checkProbe(t, id, "readiness", c.ReadinessProbe, "/readyz", c, opsPort)
	if c.StartupProbe != nil {
		checkProbe(t, id, "startup", c.StartupProbe, "/healthz", c, opsPort)
	}

	// Grace period: longer than the step timeout, which stays below the
	// broker's consumer timeout.
	grace := int64(30)
	if tmpl.Spec.TerminationGracePeriodSeconds != nil {
		grace = *tmpl.Spec.TerminationGracePeriodSeconds
	}
	if svc.timeout != "" {
		raw, ok := env[svc.timeout]
		if !ok {
			t.Errorf("%s: step timeout %s is not set", id, svc.timeout)
		}
		timeout, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || timeout <= 0 {
			t.Errorf("%s: %s=%q is not a positive number of seconds", id, svc.timeout, raw)
		}
		if grace <= timeout {
			t.Errorf("%s: terminationGracePeriodSeconds %d is not longer than %s=%d", id, grace, svc.timeout, timeout)
		}
		// The same rule the worker enforces at start (config.Common.CheckStepTimeout).
		code := loadCodeConfig(t)
		brokerRaw, set := env["BROKER_CONSUMER_TIMEOUT_SECONDS"]
		if !set {
			brokerRaw, _ = code.def(svc.name, "BROKER_CONSUMER_TIMEOUT_SECONDS")
		}
		broker, err := strconv.ParseInt(brokerRaw, 10, 64)
		if err != nil {
			t.Errorf("%s: BROKER_CONSUMER_TIMEOUT_SECONDS=%q: %v", id, brokerRaw, err)
		}
		if limit := stepTimeoutLimit(t, code, broker); broker != 0 && timeout > limit {
			t.Errorf("%s: %s=%d is not at most %d, a margin below BROKER_CONSUMER_TIMEOUT_SECONDS=%d: "+
				"the worker refuses to start, and the broker would close the channel mid-step", id, svc.timeout, timeout, limit, broker)
		}
	} else if grace < 30 {
		t.Errorf("%s: terminationGracePeriodSeconds %d, want at least 30", id, grace)
	}
	// The service's own shutdown grace ends before Kubernetes kills it and,
	// for a worker, lets a step that just started run to its timeout.
	shutdown, err := strconv.ParseInt(env["SHUTDOWN_GRACE_SECONDS"], 10, 64)
	if err != nil {
		t.Errorf("%s: SHUTDOWN_GRACE_SECONDS=%q: %v", id, env["SHUTDOWN_GRACE_SECONDS"], err)
	}
	if shutdown >= grace {
		t.Errorf("%s: SHUTDOWN_GRACE_SECONDS=%d is not below terminationGracePeriodSeconds %d", id, shutdown, grace)
	}
	if timeout, _ := strconv.ParseInt(env[svc.timeout], 10, 64); svc.timeout != "" && shutdown < timeout {
		t.Errorf("%s: SHUTDOWN_GRACE_SECONDS=%d is shorter than %s=%d: a running step would be cut off", id, shutdown, svc.timeout, timeout)
	}

	// Metrics: scraped through the shared headless Service.
	if m := r.service(metricsService); m == nil || !labels.SelectorFromSet(m.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
		t.Errorf("%s: pods are not selected by Service %s", id, metricsService)
	}

	// One PodDisruptionBudget selecting exactly these pods.
	pdbs := 0
	for _, p := range r.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			t.Errorf("PodDisruptionBudget/%s: selector: %v", p.Name, err)
			continue
		}
		if sel.Matches(labels.Set(tmpl.Labels)) {
			pdbs++
			if p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil {
				t.Errorf("PodDisruptionBudget/%s: neither minAvailable nor maxUnavailable", p.Name)
			}
		}
	}
	if pdbs != 1 {
		t.Errorf("%s: %d PodDisruptionBudgets select its pods, want 1", id, pdbs)
	}

	// Queue consumers scale with KEDA, which owns the replica count.
	var scalers []*scaledObject
	for _, so := range r.scaledObjects {
		if so.Spec.ScaleTargetRef.Name == d.Name {
			scalers = append(scalers, so)
		}
	}
	switch {
	case svc.queue == "" && len(scalers) > 0:
		t.Errorf("%s: consumes no queue but has a ScaledObject", id)
	case svc.queue == "" && d.Spec.Replicas == nil:
		t.Errorf("%s: not scaled by KEDA, so it needs spec.replicas", id)
	case svc.queue != "" && len(scalers) != 1:
		t.Errorf("%s: %d ScaledObjects target it, want 1", id, len(scalers))
	case svc.queue != "":
		if d.Spec.Replicas != nil {
			t.Errorf("%s: spec.replicas is set although KEDA owns the replica count (every apply would reset it)", id)
		}
		r.checkScaledObject(t, scalers[0], svc)
	}

	if svc.name == "dispatcher" {
		httpPort := portOf(t, id, env["DISPATCHER_HTTP_ADDR"], "DISPATCHER_HTTP_ADDR")
		// The dispatcher's default listens on loopback only: in a pod the
		// Service reaches it only when it listens on the pod's address.
		if host, _, _ := net.SplitHostPort(env["DISPATCHER_HTTP_ADDR"]); host != "" && host != "0.0.0.0" && host != "::" {
			t.Errorf("%s: DISPATCHER_HTTP_ADDR=%q listens on %s only; the Service cannot reach it (want :8090)",
				id, env["DISPATCHER_HTTP_ADDR"], host)
		}
		if containerPort(c, "http") != httpPort {
			t.Errorf("%s: container port http is not DISPATCHER_HTTP_ADDR's port %d", id, httpPort)
		}
		if _, secret := r.secretVar(c, "DISPATCHER_API_TOKEN"); !secret {
			t.Errorf("%s: DISPATCHER_API_TOKEN does not come from a Secret", id)
		}
	}
}

// checkDubflowPod applies the rules every dubflow pod follows on top of
// checkPod: its own image, read-only root with a scratch emptyDir at
// TMPDIR, credentials from Secrets.
func (r *rendered) checkDubflowPod(t *testing.T, id, object, kind string, tmpl corev1.PodTemplateSpec) {
	r.checkPod(t, id, tmpl)
	svc, ok := serviceByObject(kind, object)
	if !ok {
		t.Errorf("%s is not in the services table", id)
		return
	}
	for _, c := range tmpl.Spec.Containers {
		cid := id + " container " + c.Name
		named, err := reference.ParseNormalizedNamed(c.Image)
		if err == nil && !strings.HasSuffix(reference.Path(named), "dubflow/"+svc.name) {
			t.Errorf("%s: image %s is not dubflow/%s", cid, c.Image, svc.name)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: root filesystem is not read-only", cid)
		}
		env, _ := r.env(c)
		tmp := env["TMPDIR"]
		if tmp == "" {
			t.Errorf("%s: TMPDIR is not set", cid)
		} else if !mountsEmptyDir(tmpl.Spec, c, tmp) {
			t.Errorf("%s: TMPDIR %s is not a writable emptyDir mount", cid, tmp)
		}
		for _, v := range credentialVars {
			if _, secret := r.secretVar(c, v); !secret {
				t.Errorf("%s: %s does not come from a Secret", cid, v)
			}
		}
	}
}

// checkPod applies the rules for every pod, ours and the local stack's:
// non-root, no privilege escalation, capabilities dropped, a seccomp
// profile, resource requests, pinned images and resolvable references.
func (r *rendered) checkPod(t *testing.T, id string, tmpl corev1.PodTemplateSpec) {
	spec := tmpl.Spec
	for k, v := range tmpl.Labels {
		for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
			t.Errorf("%s: label %s=%s: %s", id, k, v, msg)
		}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken is not false (dubflow never calls the Kubernetes API)", id)
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if len(spec.InitContainers) > 0 {
		t.Errorf("%s: init containers are not checked by these tests", id)
	}
	for _, c := range spec.Containers {
		cid := id + " container " + c.Name
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			t.Errorf("%s: name: %s", cid, msg)
		}
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot := firstBool(sc.RunAsNonRoot, psc.RunAsNonRoot)
		user := firstInt(sc.RunAsUser, psc.RunAsUser)
		if !nonRoot || user == nil || *user == 0 {
			t.Errorf("%s: does not run as a non-root user (runAsNonRoot %v, runAsUser %s)", cid, nonRoot, show(user))
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", cid)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: capabilities are not dropped (drop ALL, add none)", cid)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccomp profile is not RuntimeDefault", cid)
		}
		checkImage(t, cid, c.Image)
		checkResources(t, cid, c.Resources)
		r.checkReferences(t, cid, c)
	}
}

func (r *rendered) checkScaledObject(t *testing.T, so *scaledObject, svc service) {
	id := "ScaledObject/" + so.Name
	if k := so.Spec.ScaleTargetRef.Kind; k != "" && k != "Deployment" {
		t.Errorf("%s: scales a %s, want a Deployment", id, k)
	}
	minR, maxR := so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount
	if minR == nil || *minR < 1 {
		t.Errorf("%s: minReplicaCount %s, want at least 1 (no cold start for the chain)", id, show(minR))
	}
	if maxR == nil || (minR != nil && *maxR < *minR) {
		t.Errorf("%s: maxReplicaCount %s is unset or below minReplicaCount %s", id, show(maxR), show(minR))
	}
	if len(so.Spec.Triggers) != 1 {
		t.Fatalf("%s: %d triggers, want 1", id, len(so.Spec.Triggers))
	}
	tr := so.Spec.Triggers[0]
	md := tr.Metadata
	if tr.Type != "rabbitmq" {
		t.Errorf("%s: trigger type %q, want rabbitmq", id, tr.Type)
	}
	if md["queueName"] != svc.queue {
		t.Errorf("%s: queueName %q, want %q", id, md["queueName"], svc.queue)
	}
	if md["mode"] != "QueueLength" {
		t.Errorf("%s: mode %q, want QueueLength", id, md["mode"])
	}
	if v, err := strconv.Atoi(md["value"]); err != nil || v < 1 {
		t.Errorf("%s: value %q is not a positive queue length per replica", id, md["value"])
	}
	known := []string{"protocol", "queueName", "mode", "value", "activationValue", "vhostName", "host", "hostFromEnv", "unsafeSsl", "excludeUnacknowledged"}
	for k := range md {
		if !slices.Contains(known, k) {
			t.Errorf("%s: rabbitmq trigger metadata %q is not a KEDA rabbitmq scaler parameter", id, k)
		}
	}
	if _, ok := md["host"]; ok {
		t.Errorf("%s: the broker URL is inline; it must come from a Secret through a TriggerAuthentication", id)
	}
	if tr.AuthenticationRef == nil {
		t.Fatalf("%s: no authenticationRef", id)
	}
	var auth *triggerAuthentication
	for _, a := range r.triggerAuths {
		if a.Name == tr.AuthenticationRef.Name {
			auth = a
		}
	}
	if auth == nil {
		t.Fatalf("%s: TriggerAuthentication %q is not rendered", id, tr.AuthenticationRef.Name)
	}
	host := false
	for _, ref := range auth.Spec.SecretTargetRef {
		if ref.Parameter == "host" {
			host = true
			if ref.Key != "AMQP_URL" || !r.secretExists(ref.Name) {
				t.Errorf("TriggerAuthentication/%s: host from %s/%s, want the workers' AMQP_URL Secret key", auth.Name, ref.Name, ref.Key)
			}
		}
	}
	if !host {
		t.Errorf("TriggerAuthentication/%s: no host parameter", auth.Name)
	}
}

func (r *rendered) checkScaledObjectsTargetDeployments(t *testing.T) {
	for _, so := range r.scaledObjects {
		found := slices.ContainsFunc(r.deployments, func(d *appsv1.Deployment) bool { return d.Name == so.Spec.ScaleTargetRef.Name })
		if !found {
			t.Errorf("ScaledObject/%s: target Deployment %q is not rendered", so.Name, so.Spec.ScaleTargetRef.Name)
		}
	}
}

// checkServices: every Service selects some pods and targets a port they
// declare; the dispatcher's API has one.
func (r *rendered) checkServices(t *testing.T) {
	type pod struct {
		labels map[string]string
		spec   corev1.PodSpec
	}
	var pods []pod
	for _, d := range r.deployments {
		pods = append(pods, pod{d.Spec.Template.Labels, d.Spec.Template.Spec})
	}
	for _, s := range r.statefulSets {
		pods = append(pods, pod{s.Spec.Template.Labels, s.Spec.Template.Spec})
	}
	for _, s := range r.services {
		id := "Service/" + s.Name
		matched := 0
		for _, p := range pods {
			if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.labels)) {
				continue
			}
			matched++
			for _, port := range s.Spec.Ports {
				if port.TargetPort.StrVal == "" {
					t.Errorf("%s: port %s targets a number, name the container port instead", id, port.Name)
					continue
				}
				if !slices.ContainsFunc(p.spec.Containers, func(c corev1.Container) bool { return containerPort(c, port.TargetPort.StrVal) != 0 }) {
					t.Errorf("%s: targetPort %s is not a port of the selected pods", id, port.TargetPort.StrVal)
				}
			}
		}
		if matched == 0 {
			t.Errorf("%s: selects no pods", id)
		}
	}
	if s := r.service("dispatcher"); s == nil || len(s.Spec.Ports) == 0 || s.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("the dispatcher's API has no Service on its http port")
	}
	if s := r.service(metricsService); s == nil || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.StrVal != opsPortName {
		t.Errorf("Service %s does not expose the ops port", metricsService)
	}
}

// checkMigratePrerequisites: the upgrade procedure (README.md) applies the
// objects labelled component config or migrate before anything else, so
// the migrate Job's pod must find every ConfigMap and Secret among them.
func (r *rendered) checkMigratePrerequisites(t *testing.T) {
	first := func(l map[string]string) bool {
		c := l["app.kubernetes.io/component"]
		return c == "config" || c == "migrate"
	}
	for _, j := range r.jobs {
		if !first(j.Labels) {
			t.Errorf("Job/%s: not labelled to be applied before the rollout", j.Name)
		}
		for _, c := range j.Spec.Template.Spec.Containers {
			var cms, secrets []string
			for _, from := range c.EnvFrom {
				if from.ConfigMapRef != nil {
					cms = append(cms, from.ConfigMapRef.Name)
				}
				if from.SecretRef != nil {
					secrets = append(secrets, from.SecretRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					cms = append(cms, e.ValueFrom.ConfigMapKeyRef.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secrets = append(secrets, e.ValueFrom.SecretKeyRef.Name)
				}
			}
			for _, name := range cms {
				if cm := r.configMaps[name]; cm != nil && !first(cm.Labels) {
					t.Errorf("Job/%s needs ConfigMap %s, which is not applied before the rollout", j.Name, name)
				}
			}
			for _, name := range secrets {
				if s := r.secrets[name]; s != nil && !first(s.Labels) {
					t.Errorf("Job/%s needs Secret %s, which is not applied before the rollout", j.Name, name)
				}
			}
		}
	}
}

// checkOverlay holds what differs between the overlays.
func (r *rendered) checkOverlay(t *testing.T) {
	cfg := r.configMap(configName)
	if cfg == nil {
		return
	}
	for _, v := range credentialVars {
		if _, ok := cfg.Data[v]; ok {
			t.Errorf("ConfigMap %s holds the credential %s", configName, v)
		}
	}
	limit, err := strconv.Atoi(cfg.Data["QUEUE_DELIVERY_LIMIT"])
	if err != nil || limit < 1 {
		t.Errorf("QUEUE_DELIVERY_LIMIT=%q is not a positive number", cfg.Data["QUEUE_DELIVERY_LIMIT"])
	}
	switch r.overlay {
	case "production":
		if cfg.Data["S3_USE_SSL"] != "true" {
			t.Errorf("production: S3_USE_SSL=%q, want true", cfg.Data["S3_USE_SSL"])
		}
		if len(r.secrets) > 0 {
			t.Errorf("production: the overlay renders %d Secrets; credentials are created by the operator, not kept in git", len(r.secrets))
		}
		for _, d := range r.deployments {
			img := d.Spec.Template.Spec.Containers[0].Image
			if named, err := reference.ParseNormalizedNamed(img); err != nil || reference.Domain(named) == "docker.io" {
				t.Errorf("production: Deployment/%s image %s is not from the production registry", d.Name, img)
			}
		}
	case "local":
		for _, base := range externalSecrets {
			found := false
			for name := range r.secrets {
				found = found || generatedName(name, base)
			}
			if !found {
				t.Errorf("local: Secret %s is not generated", base)
			}
		}
	}
}

// env resolves a container's environment: envFrom ConfigMaps, then env
// literals and ConfigMap keys. Secret-backed variables are reported apart.
func (r *rendered) env(c corev1.Container) (values map[string]string, secretVars []string) {
	values = map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			if cm := r.configMaps[from.ConfigMapRef.Name]; cm != nil {
				for k, v := range cm.Data {
					values[from.Prefix+k] = v
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			values[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm := r.configMaps[e.ValueFrom.ConfigMapKeyRef.Name]; cm != nil {
				values[e.Name] = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			}
		case e.ValueFrom.SecretKeyRef != nil:
			secretVars = append(secretVars, e.Name)
		}
	}
	return values, secretVars
}

// secretVar reports whether a variable of c is taken from a Secret (and
// not also set by a ConfigMap or literal).
func (r *rendered) secretVar(c corev1.Container, name string) (string, bool) {
	values, secretVars := r.env(c)
	if _, plain := values[name]; plain {
		return "", false
	}
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name, slices.Contains(secretVars, name)
		}
	}
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil {
			if s, ok := r.secrets[from.SecretRef.Name]; ok {
				if _, ok := s.Data[name]; ok {
					return s.Name, true
				}
			}
		}
	}
	return "", false
}

func (r *rendered) secretExists(name string) bool {
	if _, ok := r.secrets[name]; ok {
		return true
	}
	return r.overlay == "production" && slices.Contains(externalSecrets, name)
}

// checkReferences: every ConfigMap and Secret a container names exists
// (production Secrets are the operator's, listed in externalSecrets), and
// every Secret key it needs is there.
func (r *rendered) checkReferences(t *testing.T, cid string, c corev1.Container) {
	for _, from := range c.EnvFrom {
		if ref := from.ConfigMapRef; ref != nil && r.configMaps[ref.Name] == nil {
			t.Errorf("%s: envFrom ConfigMap %s is not rendered", cid, ref.Name)
		}
		if ref := from.SecretRef; ref != nil && !r.secretExists(ref.Name) {
			t.Errorf("%s: envFrom Secret %s does not exist", cid, ref.Name)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
			if cm := r.configMaps[ref.Name]; cm == nil {
				t.Errorf("%s: %s from ConfigMap %s, which is not rendered", cid, e.Name, ref.Name)
			}
		}
		if ref := e.ValueFrom.SecretKeyRef; ref != nil {
			if !r.secretExists(ref.Name) {
				t.Errorf("%s: %s from Secret %s, which does not exist", cid, e.Name, ref.Name)
				continue
			}
			optional := ref.Optional != nil && *ref.Optional
			if s, ok := r.secrets[ref.Name]; ok && !optional {
				if _, ok := s.Data[ref.Key]; !ok {
					t.Errorf("%s: %s from Secret %s key %s, which the Secret lacks", cid, e.Name, ref.Name, ref.Key)
				}
			}
		}
	}
}

func (r *rendered) service(name string) *corev1.Service {
	for _, s := range r.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func checkSelector(t *testing.T, id string, sel *metav1.LabelSelector, podLabels map[string]string) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(podLabels)) {
		t.Errorf("%s: selector %v does not select its own pod template (%v)", id, sel, err)
	}
}

func checkProbe(t *testing.T, id, which string, p *corev1.Probe, path string, c corev1.Container, port int32) {
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP %s probe", id, which)
		return
	}
	if p.HTTPGet.Path != path {
		t.Errorf("%s: %s probe on %s, want %s", id, which, p.HTTPGet.Path, path)
	}
	got := p.HTTPGet.Port.IntVal
	if name := p.HTTPGet.Port.StrVal; name != "" {
		got = containerPort(c, name)
	}
	if got != port {
		t.Errorf("%s: %s probe on port %d, but OPS_ADDR serves %d", id, which, got, port)
	}
}

// checkImage: a pinned image, by a tag that is not "latest" or by digest.
func checkImage(t *testing.T, cid, image string) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		t.Errorf("%s: image %q: %v", cid, image, err)
		return
	}
	_, digested := named.(reference.Digested)
	tagged, isTagged := named.(reference.Tagged)
	switch {
	case digested:
	case !isTagged:
		t.Errorf("%s: image %s has no tag (that means latest)", cid, image)
	case tagged.Tag() == "latest":
		t.Errorf("%s: image %s uses the tag latest", cid, image)
	}
}

func checkResources(t *testing.T, cid string, res corev1.ResourceRequirements) {
	cpu, mem := res.Requests[corev1.ResourceCPU], res.Requests[corev1.ResourceMemory]
	if cpu.IsZero() || mem.IsZero() {
		t.Errorf("%s: requests cpu %s and memory %s, want both set", cid, cpu.String(), mem.String())
	}
	limit, ok := res.Limits[corev1.ResourceMemory]
	if !ok || limit.Cmp(mem) < 0 {
		t.Errorf("%s: memory limit %s is missing or below the request %s", cid, limit.String(), mem.String())
	}
	for name, q := range res.Requests {
		if q.Cmp(resource.Quantity{}) < 0 {
			t.Errorf("%s: negative request %s", cid, name)
		}
	}
}

func mountsEmptyDir(spec corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path || m.ReadOnly {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// portOf returns the port of a listen address such as ":8081".
func portOf(t *testing.T, id, addr, variable string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	n, perr := strconv.ParseInt(port, 10, 32)
	if err != nil || perr != nil || n <= 0 {
		t.Errorf("%s: %s=%q is not a listen address with a port", id, variable, addr)
		return -1
	}
	return int32(n)
}

func firstBool(vs ...*bool) bool {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	return false
}

func firstInt(vs ...*int64) *int64 {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// show prints an optional number for an error message.
func show[T int32 | int64](v *T) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(*v)
}

// generatedName reports whether name is base, or base with the hash suffix
// kustomize gives generated ConfigMaps and Secrets.
func generatedName(name, base string) bool {
	return name == base || (strings.HasPrefix(name, base+"-") && len(name) == len(base)+11)
}

// configMap finds a rendered ConfigMap by its name before kustomize's hash.
func (r *rendered) configMap(base string) *corev1.ConfigMap {
	for name, cm := range r.configMaps {
		if generatedName(name, base) {
			return cm
		}
	}
	return nil
}
