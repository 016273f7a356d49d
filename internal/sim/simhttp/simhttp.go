// Package simhttp holds the JSON plumbing the simulators' public and
// control APIs share. (GitLab's simulator keeps its own: GitLab's error
// body is {"message": …}, not {"error": …}.)
package simhttp

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// MaxBody bounds what a simulator reads from a request body.
const MaxBody = 1 << 20

// ReadJSON decodes an optional JSON body: an empty body leaves v as is.
func ReadJSON(r *http.Request, v any) error {
	err := json.NewDecoder(io.LimitReader(r.Body, MaxBody)).Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes {"error": msg} with status.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, map[string]string{"error": msg})
}
