package system

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/dubflow/dubflow/services/console/internal/route"
)

// SettingsList is what GET /api/config answers: every run-time setting
// with its value now, and how soon a running service takes a change.
type SettingsList struct {
	Settings    []setting.Setting `json:"settings"`
	PollSeconds float64           `json:"pollSeconds"`
}

// listSettings answers GET /api/config (seed 003's system_config).
func (s Room) listSettings(w http.ResponseWriter, r *http.Request) {
	list, err := setting.List(r.Context(), s.Pool)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	route.JSON(w, http.StatusOK, SettingsList{Settings: list, PollSeconds: setting.Poll.Seconds()})
}

// settingBody is what PUT /api/config/{key} reads: the value as a JSON
// string or number.
type settingBody struct {
	Value json.RawMessage `json:"value"`
}

// text is the value as the table holds it: a string's content, a
// number's literal.
func (b settingBody) text() (string, error) {
	raw := strings.TrimSpace(string(b.Value))
	switch {
	case raw == "" || raw == "null":
		return "", apierr.BadRequest(`request body: want {"value": …}`)
	case strings.HasPrefix(raw, `"`):
		var v string
		if err := json.Unmarshal(b.Value, &v); err != nil {
			return "", apierr.BadRequest("value: " + err.Error())
		}
		return v, nil
	case strings.HasPrefix(raw, "-") || (raw[0] >= '0' && raw[0] <= '9'):
		return raw, nil
	}
	return "", apierr.BadRequest("value: want a string or a number")
}

// putSetting answers PUT /api/config/{key}: the setting changed after the
// same check every door makes (setting.Set; 400 with its text when the
// value does not fit, 404 for an unknown key), audited with the value
// before and after. Running services take it within pollSeconds.
func (s Room) putSetting(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	auditlog.NoteTarget(r, key)
	var body settingBody
	if err := jsonbody.Decode(r, &body); err != nil {
		s.Fail(w, r, err)
		return
	}
	value, err := body.text()
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	auditlog.Note(r, "value", value)
	if before, err := setting.Get(r.Context(), s.Pool, key); err == nil {
		auditlog.Note(r, "from", before.Value)
	}
	got, err := setting.Set(r.Context(), s.Pool, key, value, route.PrincipalOf(r).Name)
	switch {
	case errors.Is(err, setting.ErrUnknown):
		s.Fail(w, r, apierr.NotFound(err.Error()))
	case errors.Is(err, setting.ErrInvalid):
		s.Fail(w, r, apierr.BadRequest(err.Error()))
	case err != nil:
		s.Fail(w, r, err)
	default:
		route.JSON(w, http.StatusOK, got)
	}
}
