package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
)

// RegisterControl adds the delivery control API to mux under prefix (for
// example "/_control/deliveries"), so every simulator that owns a
// Deliverer exposes the same endpoints:
//
//	GET    prefix               the log, the faults in force, the held count
//	DELETE prefix               clear the log
//	GET    prefix/faults        the faults in force
//	POST   prefix/faults        change faults (FaultsPatch; absent fields stay)
//	DELETE prefix/faults        every fault off, held deliveries released
//	POST   prefix/pause         hold deliveries from now on
//	POST   prefix/resume        release held ones; {"reverse":true} newest first
//	POST   prefix/wait?timeoutMs=N  answer when nothing is in flight (204) or 504
func (d *Deliverer) RegisterControl(mux *http.ServeMux, prefix string) {
	mux.HandleFunc("GET "+prefix, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"targets": d.Targets(), "faults": d.Faults(), "held": d.Held(), "deliveries": d.Log(),
		})
	})
	mux.HandleFunc("DELETE "+prefix, func(w http.ResponseWriter, r *http.Request) {
		d.ClearLog()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.Faults())
	})
	mux.HandleFunc("POST "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		var p FaultsPatch
		if err := readJSON(r, &p); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, d.SetFaults(p))
	})
	mux.HandleFunc("DELETE "+prefix+"/faults", func(w http.ResponseWriter, r *http.Request) {
		d.ResetFaults()
		writeJSON(w, http.StatusOK, d.Faults())
	})
	mux.HandleFunc("POST "+prefix+"/pause", func(w http.ResponseWriter, r *http.Request) {
		d.Pause()
		writeJSON(w, http.StatusOK, d.Faults())
	})
	mux.HandleFunc("POST "+prefix+"/resume", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reverse bool `json:"reverse"`
		}
		if err := readJSON(r, &body); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"released": d.Resume(body.Reverse)})
	})
	mux.HandleFunc("POST "+prefix+"/wait", func(w http.ResponseWriter, r *http.Request) {
		timeout := 10 * time.Second
		if v := r.URL.Query().Get("timeoutMs"); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms < 0 {
				writeError(w, http.StatusBadRequest, "timeoutMs must be a non-negative integer")
				return
			}
			timeout = time.Duration(ms) * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := d.Wait(ctx); err != nil {
			writeError(w, http.StatusGatewayTimeout, "deliveries still in flight")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// readJSON decodes an optional JSON body: an empty body leaves v as is.
func readJSON(r *http.Request, v any) error {
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
