package gitlab

import (
	"encoding/json"
	"net/url"
	"testing"
)

// TestReadCommitRequest is the table of the create-commit call's
// parameter errors, in Grape's order, and the start branch's default.
func TestReadCommitRequest(t *testing.T) {
	act := json.RawMessage(`[{"action":"create","file_path":"f"}]`)
	tests := []struct {
		name      string
		json      map[string]json.RawMessage
		wantErr   string
		wantStart string
	}{
		{"branch, message and actions: starts on the branch", map[string]json.RawMessage{"branch": []byte(`"w"`), "commit_message": []byte(`"m"`), "actions": act}, "", "w"},
		{"a start branch is kept", map[string]json.RawMessage{"branch": []byte(`"w"`), "commit_message": []byte(`"m"`), "actions": act, "start_branch": []byte(`"main"`)}, "", "main"},
		{"a start sha leaves no start branch", map[string]json.RawMessage{"branch": []byte(`"w"`), "commit_message": []byte(`"m"`), "actions": act, "start_sha": []byte(`"abc"`)}, "", ""},
		{"actions not a list is named first", map[string]json.RawMessage{"actions": []byte(`{}`)}, "actions is invalid", ""},
		{"no branch", map[string]json.RawMessage{"commit_message": []byte(`"m"`), "actions": act}, "branch is missing", ""},
		{"no message", map[string]json.RawMessage{"branch": []byte(`"w"`), "actions": act}, "commit_message is missing", ""},
		{"no actions", map[string]json.RawMessage{"branch": []byte(`"w"`), "commit_message": []byte(`"m"`), "actions": []byte(`[]`)}, "actions is missing", ""},
		{"start branch and sha", map[string]json.RawMessage{"branch": []byte(`"w"`), "commit_message": []byte(`"m"`), "actions": act,
			"start_branch": []byte(`"main"`), "start_sha": []byte(`"abc"`)}, "start_branch, start_sha are mutually exclusive", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := readCommitRequest(params{json: tt.json, form: url.Values{}, query: url.Values{}})
			if err != tt.wantErr {
				t.Fatalf("error %q, want %q", err, tt.wantErr)
			}
			if err == "" && c.startBranch != tt.wantStart {
				t.Fatalf("start branch %q, want %q", c.startBranch, tt.wantStart)
			}
		})
	}
}

// TestMRUpdateMissing: an update must name one field it takes, by value
// or as JSON of any kind.
func TestMRUpdateMissing(t *testing.T) {
	for name, tt := range map[string]struct {
		p       params
		missing bool
	}{
		"nothing":             {params{form: url.Values{}, query: url.Values{}}, true},
		"an unknown field":    {params{form: url.Values{"colour": {"red"}}, query: url.Values{}}, true},
		"a title in the form": {params{form: url.Values{"title": {"t"}}, query: url.Values{}}, false},
		"labels as JSON list": {params{json: map[string]json.RawMessage{"labels": []byte(`["a"]`)}, form: url.Values{}, query: url.Values{}}, false},
		"a null assignee":     {params{json: map[string]json.RawMessage{"assignee_id": []byte(`null`)}, form: url.Values{}, query: url.Values{}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := mrUpdateMissing(tt.p) != ""; got != tt.missing {
				t.Fatalf("missing = %v, want %v", got, tt.missing)
			}
		})
	}
}

// TestCommitActionRefusals: each action kind's refusal, with GitLab's
// message, and the checks every action shares.
func TestCommitActionRefusals(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
		"branch": "work", "start_branch": "main", "commit_message": "start the branch",
		"actions": []any{map[string]any{"action": "create", "file_path": "bindings/a.yaml", "content": binding("alice")}},
	})
	tests := []struct {
		name   string
		action map[string]any
		want   string
	}{
		{"no file path", map[string]any{"action": "create", "file_path": ""}, "file_path is missing"},
		{"a path that cleans to nothing", map[string]any{"action": "create", "file_path": "/"}, "file_path is missing"},
		{"a bad path before a bad action", map[string]any{"action": "paint", "file_path": ""}, "file_path is missing"},
		{"bad base64", map[string]any{"action": "create", "file_path": "x", "content": "!!", "encoding": "base64"}, "Invalid base64 content"},
		{"an unknown action", map[string]any{"action": "paint", "file_path": "x"}, "actions[action] does not have a valid value"},
		{"move from a missing file", map[string]any{"action": "move", "file_path": "y", "previous_path": "nope"}, "A file with this name doesn't exist"},
		{"move without a previous path", map[string]any{"action": "move", "file_path": "y"}, "A file with this name doesn't exist"},
		{"move onto a file", map[string]any{"action": "move", "file_path": "bindings/README.md", "previous_path": "bindings/a.yaml"}, "A file with this name already exists"},
		{"chmod of a missing file", map[string]any{"action": "chmod", "file_path": "nope", "execute_filemode": true}, "A file with this name doesn't exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.must(400, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
				"branch": "work", "commit_message": "x", "actions": []any{tt.action}})
			if r.str("message") != tt.want {
				t.Fatalf("body %s, want message %q", r.Raw, tt.want)
			}
		})
	}
	t.Run("chmod keeps the content", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "work", "commit_message": "x", "actions": []any{map[string]any{"action": "chmod", "file_path": "bindings/a.yaml", "execute_filemode": true}}})
		got := e.call("GET", tokBot, "/projects/1/repository/files/"+url.PathEscape("bindings/a.yaml")+"/raw?ref=work", nil)
		if got.Status != 200 || string(got.Raw) != binding("alice") {
			t.Fatalf("a.yaml after chmod: %d %q", got.Status, got.Raw)
		}
	})
}
