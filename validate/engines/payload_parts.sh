# Sourced by unpack_payload.sh (and its test): join_parts NAME OUT concatenates NAME.part.0, NAME.part.1, ... in
# numeric order into OUT when any part is present (a tarball carried in pieces, one device call each: split_nixl.sh);
# nothing when none is (OUT, if carried whole, is left as it is). The caller checks OUT's sha256 afterwards.
join_parts() {
  local name=$1 out=$2 parts
  parts=$(ls "$name".part.* 2>/dev/null | sort -t. -k3 -n) || true
  [ -z "$parts" ] && return 0
  # shellcheck disable=SC2086
  cat $parts > "$out"
  echo "joined $(echo $parts | wc -w) parts into $out"
}
