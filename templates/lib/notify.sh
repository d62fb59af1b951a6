# --- obc's library: notify -------------------------------------------------------------
# notify (docs/notify.md): on the events of OBC_NOTIFY_ON, the event's JSON goes to a command
# (the job's obc_notify_command) on its stdin, or is POSTed with curl to OBC_NOTIFY_URL or to
# the URL in the variable OBC_NOTIFY_URL_SECRET names. A notification that fails or hangs is
# said in one line and given up after OBC_NOTIFY_SECONDS (+1): it never changes how the job
# ends. The URL is never expanded in a command line: `sh -x` and the logs show no part of it.

OBC_NO_CURL=''

# obc_notify EVENT [EXIT_CODE]: tells of EVENT, if it is one of OBC_NOTIFY_ON.
# shellcheck disable=SC2153 # OBC_TMP, the run's private folder (part rundir), is no OBC_STEP
obc_notify() {
  case " $OBC_NOTIFY_ON " in *" $1 "*) ;; *) return 0 ;; esac
  if [ -n "$OBC_NOTIFY_URL$OBC_NOTIFY_URL_SECRET" ] && ! obc_which curl "$PATH" >/dev/null; then
    [ -n "$OBC_NO_CURL" ] || obc_say "notify: curl not found on PATH: no event is POSTed"
    OBC_NO_CURL=1
    return 0
  fi
  obc_notify_payload "$@" || return 0
  if [ -n "$OBC_NOTIFY_URL$OBC_NOTIFY_URL_SECRET" ]; then
    obc_notify_bounded obc_notify_post
  else
    obc_notify_bounded obc_notify_command obc_notify_exec
  fi
  case $OBC_NOTIFIED in
    0) ;;
    late) obc_say "notify $1: no answer within $((OBC_NOTIFY_SECONDS + 1)) s, given up" ;;
    *) obc_say "notify $1: failed (exit code $OBC_NOTIFIED)" ;;
  esac
  rm -f -- "$OBC_TMP/notify.json"
}

# Writes the event's JSON to $OBC_TMP/notify.json and sets the variables the command gets:
# the job, event, step (null before any), attempt, exit code, Slurm job id, run dir and,
# but on started and done, the step's log and its last lines (escaped by obc_json_text,
# whatever bytes they hold).
obc_notify_payload() {
  OBC_EVENT=$1 OBC_EXIT_CODE=${2:-} OBC_STEP=${OBC_NAME:-} OBC_TAIL=null OBC_STEP_LOG=
  case $OBC_LOG in /*) OBC_STEP_LOG=$OBC_LOG ;; esac
  case $1 in
    started | done) OBC_STEP_LOG= ;;
    *) [ ! -f "$OBC_STEP_LOG" ] ||
         OBC_TAIL=$(tail -n 20 -- "$OBC_STEP_LOG" | tail -c 4096 | obc_json_text) ;;
  esac
  OBC_WORD="$OBC_JOB: $1"
  [ -z "$OBC_STEP" ] || OBC_WORD="$OBC_WORD, step $OBC_STEP"
  [ -z "$OBC_EXIT_CODE" ] || OBC_WORD="$OBC_WORD, exit code $OBC_EXIT_CODE"
  {
    printf '{"text": %s, "job": "%s", "event": "%s", "step": %s, "attempt": %s, ' \
      "$(printf '%s' "obc: $OBC_WORD (attempt $OBC_ATTEMPT)" | obc_json_text)" "$OBC_JOB" "$1" \
      "$(obc_json "$OBC_STEP")" "${OBC_ATTEMPT:-null}"
    printf '"exit_code": %s, "slurm_job_id": %s, "run_dir": %s, "log": %s, "log_tail": %s}\n' \
      "${OBC_EXIT_CODE:-null}" "$(obc_json "${SLURM_JOB_ID:-}")" \
      "$(printf '%s' "$OBC_RUN_DIR" | obc_json_text)" \
      "$(if [ -n "$OBC_STEP_LOG" ]; then printf '%s' "$OBC_STEP_LOG" | obc_json_text; else echo null; fi)" \
      "$OBC_TAIL"
  } > "$OBC_TMP/notify.json" || { obc_say "notify $1: cannot write its JSON"; return 1; }
}

# Prints its input as one JSON string: quotes, backslashes and control characters escaped,
# lines joined by \n, NUL dropped, and each byte that is not part of a valid UTF-8
# character written as U+FFFD. Byte by byte (LC_ALL=C), in any awk.
obc_json_text() {
  tr -d '\000' | LC_ALL=C awk '
    BEGIN { for (i = 1; i < 256; i++) code[sprintf("%c", i)] = i; out = "" }
    NR > 1 { out = out "\\n" }
    {
      n = length($0); i = 1
      while (i <= n) {
        c = substr($0, i, 1); b = code[c]; size = 1
        if (c == "\"" || c == "\\") out = out "\\" c
        else if (b < 32 || b == 127) out = out sprintf("\\u%04x", b)
        else if (b < 128) out = out c
        else {
          size = b >= 194 && b <= 223 ? 2 : b >= 224 && b <= 239 ? 3 : b >= 240 && b <= 244 ? 4 : 0
          low = b == 224 ? 160 : b == 240 ? 144 : 128
          high = b == 237 ? 159 : b == 244 ? 143 : 191
          for (k = 1; k < size; k++) {
            next_byte = code[substr($0, i + k, 1)]
            if (next_byte < low || next_byte > high) size = 0
            low = 128; high = 191
          }
          if (size) out = out substr($0, i, size)
          else { out = out "\\ufffd"; size = 1 }
        }
        i += size
      }
    }
    END { printf "\"%s\"", out }'
}

# Prints curl's config (-K) that names the URL: awk reads it from the environment by its
# variable's name, so that no command line holds it. One with a quote, a backslash or a
# control character is not a URL: no config, and curl fails.
# shellcheck disable=SC2329 # called by obc_notify_post
obc_notify_curl_config() {
  OBC_URL_NAME=${OBC_NOTIFY_URL_SECRET:-OBC_NOTIFY_URL} OBC_NOTIFY_URL=$OBC_NOTIFY_URL \
    LC_ALL=C awk 'BEGIN {
      url = ENVIRON[ENVIRON["OBC_URL_NAME"]]
      if (url !~ /^https?:\/\/[!-~]+$/ || url ~ /["\\]/) exit 1
      printf "url = \"%s\"\n", url
    }'
}

# obc_notify_bounded FUNCTION [ARG...]: runs it in the background with the event's facts in
# its environment and its JSON on stdin, and KILLs it if it has not ended within
# OBC_NOTIFY_SECONDS + 1 (a command with all it started: obc_notify_exec makes it a session
# of its own); sets OBC_NOTIFIED to its exit code, or `late` if it was stopped. Neither it nor
# its watcher holds the run dir's lock (fd 9).
obc_notify_bounded() {
  # (The redirections inside, by exec: yash would keep a process of its own for those of a
  # background subshell, and $! would not be the command's session.)
  rm -f -- "$OBC_TMP/notify.late"
  (
    exec < "$OBC_TMP/notify.json" >&2 9>&-
    export OBC_EVENT OBC_JOB OBC_STEP OBC_ATTEMPT OBC_EXIT_CODE OBC_RUN_DIR OBC_STEP_LOG
    "$@"
  ) &
  OBC_NOTIFIER=$!
  (
    exec > /dev/null 2>&1 9>&-
    trap 'env kill -s TERM "$OBC_SLEEP"; exit 0' TERM
    sleep "$((OBC_NOTIFY_SECONDS + 1))" &
    OBC_SLEEP=$!
    wait "$OBC_SLEEP"
    : > "$OBC_TMP/notify.late"
    env kill -s KILL -- "-$OBC_NOTIFIER" || env kill -s KILL "$OBC_NOTIFIER"
  ) &
  OBC_WATCHER=$!
  # (Quiet: bash and ksh93 would say that the command was killed, each in its own words.)
  OBC_NOTIFIED=0
  wait "$OBC_NOTIFIER" 2>/dev/null || OBC_NOTIFIED=$?
  env kill -s TERM "$OBC_WATCHER" 2>/dev/null
  wait "$OBC_WATCHER"
  [ ! -e "$OBC_TMP/notify.late" ] || OBC_NOTIFIED=late
}

# Runs the notify command as a session of its own, which its watcher stops as a whole.
# shellcheck disable=SC2329 # called by the job's obc_notify_command
obc_notify_exec() {
  exec setsid "$@"
}

# POSTs the event's JSON with curl, the URL given in its config (obc_notify_curl_config) on
# its stdin; curl's own limits end it within OBC_NOTIFY_SECONDS. Nothing it says is shown:
# its messages may name the URL.
# shellcheck disable=SC2329 # called by obc_notify_bounded
obc_notify_post() {
  obc_notify_curl_config | curl -s -o /dev/null --fail -K - \
    --connect-timeout "$OBC_NOTIFY_SECONDS" --max-time "$OBC_NOTIFY_SECONDS" \
    -H 'Content-Type: application/json' --data-binary "@$OBC_TMP/notify.json" 2>/dev/null
}
