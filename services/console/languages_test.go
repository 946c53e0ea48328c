package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// multipartTargets builds a form whose target field is repeated.
func multipartTargets(t *testing.T, path string, targets ...string) (string, *bytes.Buffer) {
	t.Helper()
	return multipartForm(t, path, url.Values{"source": {"en"}, "target": targets})
}

// checkParent checks the parent's row, its first message and that the
// video is stored once, under the parent's key.
func (f *fixture) checkParent(t *testing.T, id uuid.UUID, want []string) {
	t.Helper()
	ctx := context.Background()
	var targets []string
	var target string
	if err := f.pool.QueryRow(ctx, `SELECT targets, target_language FROM tasks WHERE id = $1`, id).Scan(&targets, &target); err != nil {
		t.Fatalf("task row: %v", err)
	}
	if !slices.Equal(targets, want) || target != want[0] {
		t.Fatalf("targets %v (target_language %s), want %v", targets, target, want)
	}
	env, err := wire.Decode(f.next(t, "task.extract_audio").Body)
	if err != nil || env.TaskID != id {
		t.Fatalf("message: %+v %v", env, err)
	}
	var p wire.ExtractAudio
	if err := json.Unmarshal(env.Payload, &p); err != nil || !slices.Equal(p.TargetLanguages, want) {
		t.Fatalf("payload %+v %v, want target_languages %v", p, err, want)
	}
	src, err := f.srv.objects.Stat(ctx, wire.DefaultKeys(id).SourceVideo)
	if err != nil {
		t.Fatalf("source video: %v", err)
	}
	if src.Size == 0 {
		t.Fatal("source video is empty")
	}
	// The video is stored once: the asr worker copies it to each child
	// where the parent's asr completes, so nothing is placed under a child's key yet.
	for _, l := range want {
		key := wire.DefaultKeys(wire.ChildTaskID(id, l)).SourceVideo
		if _, err := f.srv.objects.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("video of %s at %s placed at submission (%v); the fan-out copies it", l, key, err)
		}
	}
}

func TestUploadIntoSeveralLanguagesStoresTheVideoOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	video := sampleVideo(t, "1")
	// target repeated, one of them a list.
	ct, body := multipartTargets(t, video, "es", "ca, fr")
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusCreated, &c)
	if !slices.Equal(c.TargetLanguages, []string{"es", "ca", "fr"}) {
		t.Fatalf("answer %+v", c)
	}
	f.checkParent(t, c.TaskID, []string{"es", "ca", "fr"})

	for _, bad := range [][]string{{"es", "es"}, {"es,en"}, {"es,x!"}} {
		ct, body = multipartTargets(t, video, bad...)
		decode(t, f.do(t, "POST", "/api/tasks", adminToken, ct, body), http.StatusBadRequest, nil)
	}

	// The presigned flow: the uploaded object is the parent's video.
	up := f.presignedUpload(t, video)
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey, "targetLanguages": []string{"de", "it"}},
		http.StatusCreated, &c)
	f.checkParent(t, c.TaskID, []string{"de", "it"})
}

// insertFamily adds a parent into es and ca with one child per language:
// es done (with outputs stored), ca running.
func (f *fixture) insertFamily(t *testing.T) (parent, es, ca uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	at := time.Now().Add(-time.Minute)
	parent = uuid.New()
	if _, err := f.pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, targets,
		source_video_key, created_at, updated_at) VALUES ($1, 'running', 'en', 'es', '{es,ca}', $2, $3, $3)`,
		parent, wire.DefaultKeys(parent).SourceVideo, at); err != nil {
		t.Fatal(err)
	}
	es, ca = wire.ChildTaskID(parent, "es"), wire.ChildTaskID(parent, "ca")
	out := "outputs/" + es.String()
	res := map[string]any{"output_video_key": out + "/final.mp4", "subtitles": map[string]string{"es": out + "/final.es.srt"}}
	rb, _ := json.Marshal(res)
	for _, k := range []string{out + "/final.mp4", out + "/final.es.srt"} {
		if err := f.srv.objects.Put(ctx, k, strings.NewReader("x"), 1, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id           uuid.UUID
		lang, status string
		result       []byte
	}{{es, "es", "done", rb}, {ca, "ca", "running", nil}} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO tasks (id, status, source_language, target_language, parent_task_id,
			source_video_key, output_video_key, result, created_at, updated_at)
			VALUES ($1, $2, 'en', $3, $4, $5, $6, COALESCE($7, '{}'::jsonb), $8, $8)`, c.id, c.status, c.lang, parent,
			wire.DefaultKeys(c.id).SourceVideo, wire.DefaultKeys(c.id).OutputVideo, c.result, at.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	return parent, es, ca
}

func TestTaskDetailEmbedsItsLanguagesAndTheListShowsParents(t *testing.T) {
	t.Parallel()
	f := setup(t)
	single := f.insertTask(t, "done", time.Now().Add(-2*time.Minute))
	parent, es, ca := f.insertFamily(t)

	var d struct {
		taskDetail
		Languages *languagesView `json:"languages"`
	}
	f.doJSON(t, "GET", "/api/tasks/"+parent.String(), nil, http.StatusOK, &d)
	l := d.Languages
	if l == nil || l.ParentTaskID != nil || !slices.Equal(l.TargetLanguages, []string{"es", "ca"}) || len(l.Children) != 2 {
		t.Fatalf("languages of the parent: %+v", l)
	}
	c0, c1 := l.Children[0], l.Children[1]
	if c0.TaskID != es || c0.TargetLanguage != "es" || c0.Status != "done" || c0.Links.Output == nil ||
		len(c0.Links.Subtitles) != 1 || c0.Links.Subtitles[0].Language != "es" {
		t.Fatalf("child es: %+v", c0)
	}
	if c1.TaskID != ca || c1.TargetLanguage != "ca" || c1.Status != "running" || c1.Links.Output != nil {
		t.Fatalf("child ca: %+v", c1)
	}
	resp, err := http.Get(*c0.Links.Output)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("output link of es: %v %v", err, resp)
	}
	resp.Body.Close()

	d.Languages = nil
	f.doJSON(t, "GET", "/api/tasks/"+ca.String(), nil, http.StatusOK, &d)
	if d.Languages == nil || d.Languages.ParentTaskID == nil || *d.Languages.ParentTaskID != parent || len(d.Languages.Children) != 0 {
		t.Fatalf("languages of a child: %+v", d.Languages)
	}
	raw := map[string]json.RawMessage{}
	f.doJSON(t, "GET", "/api/tasks/"+single.String(), nil, http.StatusOK, &raw)
	if string(raw["languages"]) != "null" {
		t.Fatalf("languages of a task of one language: %s", raw["languages"])
	}

	ids := func(p taskPage) []uuid.UUID {
		var out []uuid.UUID
		for _, t := range p.Tasks {
			out = append(out, t.TaskID)
		}
		return out
	}
	var p taskPage
	f.doJSON(t, "GET", "/api/tasks", nil, http.StatusOK, &p)
	if got := ids(p); !slices.Equal(got, []uuid.UUID{parent, single}) {
		t.Fatalf("list %v, want the parent and the single task only", got)
	}
	if !slices.Equal(p.Tasks[0].TargetLanguages, []string{"es", "ca"}) || p.Tasks[0].ParentTaskID != nil {
		t.Fatalf("parent in the list: %+v", p.Tasks[0])
	}
	f.doJSON(t, "GET", "/api/tasks?includeChildren=true", nil, http.StatusOK, &p)
	if got := ids(p); len(got) != 4 || !slices.Contains(got, es) || !slices.Contains(got, ca) {
		t.Fatalf("list with children %v", got)
	}
	for _, tk := range p.Tasks {
		if (tk.TaskID == es || tk.TaskID == ca) && (tk.ParentTaskID == nil || *tk.ParentTaskID != parent) {
			t.Fatalf("child in the list: %+v", tk)
		}
	}
	f.doJSON(t, "GET", "/api/tasks?includeChildren=maybe", nil, http.StatusBadRequest, nil)
}

// TestOpenAPIDescribesTheLanguagesFields: the schemas of a task summary,
// a created task and a child name exactly the fields the API writes, and
// the several-language parameters are documented.
func TestOpenAPIDescribesTheLanguagesFields(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	for name, v := range map[string]any{"TaskSummary": taskSummary{}, "Created": created{TargetLanguages: []string{"es"}},
		"Child": view.Child{}, "Languages": languagesView{}} {
		b, _ := json.Marshal(v)
		fields := map[string]json.RawMessage{}
		_ = json.Unmarshal(b, &fields)
		props := doc.Components.Schemas[name].Properties
		for k := range fields {
			if _, ok := props[k]; !ok {
				t.Errorf("schema %s lacks %s", name, k)
			}
		}
		for k := range props {
			if _, ok := fields[k]; !ok {
				t.Errorf("schema %s names %s, which the API does not write", name, k)
			}
		}
	}
	for _, want := range []struct{ path, method, text string }{
		{"/api/tasks", "get", `"includeChildren"`},
		{"/api/tasks", "post", `"targetLanguages"`},
	} {
		if !strings.Contains(string(doc.Paths[want.path][want.method]), want.text) {
			t.Errorf("%s %s does not document %s", want.method, want.path, want.text)
		}
	}
}
