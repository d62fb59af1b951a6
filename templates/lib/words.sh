# --- obc's library: words --------------------------------------------------------------
# Shell words printed the way obc quotes them, for --dry-run. The characters a bare word may
# hold and the reserved words that must be quoted are compiler/core/shell.py's PLAIN_CHARS
# and RESERVED_WORDS (a test holds them alike).

# Prints $1 as one shell word, by the same rule as obc: bare when that is unambiguous,
# else single-quoted, so that what --dry-run prints can be pasted into a shell.
obc_quote() {
  case $1 in
    '' | *[!abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+:,./-]* | 'case' | 'coproc' | 'do' | 'done' | 'elif' | 'else' | 'end' | 'esac' | 'fi' | 'for' | 'foreach' | 'function' | 'if' | 'in' | 'nocorrect' | 'noglob' | 'repeat' | 'select' | 'then' | 'time' | 'until' | 'while') ;;
    *) printf '%s' "$1"; return ;;
  esac
  OBC_REST=$1
  printf "'"
  while :; do
    case $OBC_REST in
      *\'*) printf "%s'\\\\''" "${OBC_REST%%\'*}"; OBC_REST=${OBC_REST#*\'} ;;
      *) break ;;
    esac
  done
  printf "%s'" "$OBC_REST"
}

obc_print_command() {
  obc_quote "$1"
  shift
  for OBC_WORD in ${1+"$@"}; do
    printf ' '
    obc_quote "$OBC_WORD"
  done
  printf '\n'
}
