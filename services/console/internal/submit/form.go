package submit

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/idempotent"
)

// receiveUpload streams the multipart form's video to a temporary file
// (never whole in memory, at most MAX_VIDEO_BYTES), admits the fields and
// the video (pkg/admit), stores it at videos/{taskId}/source.mp4 and
// creates the task.
func (s Room) receiveUpload(w http.ResponseWriter, r *http.Request) (submission, error) {
	sub := submission{id: idempotent.TaskID(r)}
	r.Body = http.MaxBytesReader(w, r.Body, s.Limits.MaxVideoBytes+4*maxFieldBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return sub, apierr.BadRequest("multipart form: want Content-Type multipart/form-data with a boundary")
	}
	dir, err := os.MkdirTemp("", "dubflow-console-")
	if err != nil {
		return sub, fmt.Errorf("upload: %w", err)
	}
	defer os.RemoveAll(dir)
	path := dir + "/source"
	fields, gotVideo, err := s.readForm(mr, path)
	if err != nil {
		return sub, err
	}
	if !gotVideo {
		return sub, apierr.BadRequest("multipart form: the file field video is required")
	}
	req := admit.Request{Source: fields["source"], Targets: []string{fields["target"]}, Speaker: fields["speaker"],
		Glossary: fields["glossary"], FileName: fields[videoFileName], Subtitles: fields["subtitles"],
		SubtitlesLanguage: fields["subtitlesLanguage"], SourceSubtitles: fields["sourceSubtitles"], BurnSubtitles: fields["burnSubtitles"],
		Review: []string{fields["review"]}}
	if sub.task, err = s.admit(r.Context(), req); err != nil {
		return sub, err
	}
	if sub.project, err = s.submitProject(r, fields["project"]); err != nil {
		return sub, err
	}
	info, err := s.MediaLimits().Media(r.Context(), path)
	if err != nil {
		return sub, err
	}
	if err := sub.task.FitVideo(info.Duration); err != nil {
		return sub, err
	}
	sub.probe = admit.ProbeRecord(path, info)
	sub.sourceVideoKey = wire.DefaultKeys(sub.id).SourceVideo
	if err := s.Objects.PutFile(r.Context(), sub.sourceVideoKey, path, "video/mp4"); err != nil {
		return sub, apierr.UnavailableBecause("the video cannot be stored now; try again", err)
	}
	return sub, s.submit(r.Context(), sub)
}

// videoFileName keys, in readForm's fields, the file name of the video
// part (no form field has this name).
const videoFileName = "video/filename"

// readForm reads the form's parts: the video into path (its file name
// under videoFileName), the other fields into the map.
func (s Room) readForm(mr *multipart.Reader, path string) (map[string]string, bool, error) {
	fields := map[string]string{}
	gotVideo := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return fields, gotVideo, nil
		}
		if err != nil {
			return nil, false, formError(err, s.Limits.MaxVideoBytes)
		}
		name := part.FormName()
		switch {
		case name == "video" && !gotVideo:
			if err := s.saveVideo(part, path); err != nil {
				return nil, false, err
			}
			gotVideo, fields[videoFileName] = true, part.FileName()
		case formFields[name] != "":
			v, err := s.readField(part, name)
			if err != nil {
				return nil, false, err
			}
			if (name == "target" || name == "review") && fields[name] != "" {
				v = fields[name] + "," + v // repeated: several languages, both stages
			}
			fields[name] = v
		default:
			return nil, false, apierr.BadRequest(fmt.Sprintf("multipart form: unknown field %q (want video, %s)", name, formFieldNames))
		}
	}
}

// formFields are the form's fields besides the video, each with the name
// a refusal of its value gives (pkg/admit's field).
var formFields = map[string]string{"source": "source", "target": "target", "speaker": "speaker", "glossary": "glossary",
	"subtitles": admit.FieldSubtitles, "subtitlesLanguage": admit.FieldSubtitles, "sourceSubtitles": admit.FieldSourceSubtitles,
	"burnSubtitles": admit.FieldBurnSubtitles, "review": "review", "project": "project"}

// formFieldNames lists them for a refusal of an unknown one.
const formFieldNames = "source, target, speaker, glossary, subtitles, subtitlesLanguage, sourceSubtitles, burnSubtitles, review, project"

// readField reads a form field's value, at most maxFieldBytes; a subtitle
// file (a file part or a text field) is read as pkg/admit reads one, so
// that an empty file is refused rather than taken for none.
func (s Room) readField(part io.Reader, name string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
	if err != nil {
		return "", formError(err, s.Limits.MaxVideoBytes)
	}
	if name == "subtitles" || name == "sourceSubtitles" {
		return admit.SubtitlesText(formFields[name], b)
	}
	if len(b) > maxFieldBytes {
		return "", apierr.TooLarge(fmt.Sprintf("%s: more than %d bytes", name, maxFieldBytes))
	}
	return string(b), nil
}

// saveVideo copies the video part to path, refusing it past
// MAX_VIDEO_BYTES (admit.Limits.Size) or empty.
func (s Room) saveVideo(part io.Reader, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	limit := s.Limits.MaxVideoBytes
	n, err := io.Copy(f, io.LimitReader(part, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return formError(err, limit)
	}
	return s.MediaLimits().Size(n)
}

// formError names a body cut off at the size limit as such.
func formError(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return apierr.TooLarge(fmt.Sprintf("request body over the limit (MAX_VIDEO_BYTES=%d)", limit))
	}
	return apierr.BadRequest("multipart form: the body is not a complete multipart/form-data form")
}
