# Shared by scripts/setup-postgres and scripts/postgres-demo (sourced, not run).

# The user a PostgreSQL server of ours runs as when we are root: initdb and postgres
# refuse root. tests/src/postgres_server.rs names the same user.
server_user=ferry-postgres

# Print the directory of Debian's server binaries (initdb, postgres, pg_ctl), or fail.
postgres_bin_dir() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}
