# frozen_string_literal: true

# SQLite Production Lab: ruby-puma's Postgres side (LAB_DATABASE=postgres), required by app.rb
# only then, so a SQLite run never loads libpq. The pg gem (Debian package ruby-pg) behind the
# same seam as SqliteDatabase/Conn in app.rb: PostgresDatabase (start-up check, connect, error
# mapping, /health) and PgConn (placeholders, prepared statements, RETURNING id, reconnect).
# The endpoints, transactions, pool and writer are app.rb's, unchanged.

begin
  require "pg"
rescue LoadError => e
  raise Lab::ConfigError, "LAB_DATABASE=postgres needs the pg gem (Debian package ruby-pg): #{e.message}"
end

module Lab
  # LAB_DATABASE=postgres: one connection of the pg gem, used by one thread at a time, with
  # the same methods as Conn. As Rails' PostgreSQL adapter (prepared_statements: true), a
  # statement with parameters is prepared once per connection (`prepare "a1"`, its `?` as
  # `$1`...) and run with `exec_prepared`; one without (BEGIN, COMMIT, SAVEPOINT ...) is sent
  # with `exec`. pg 1.4's exec* are its async API: the thread waits for Postgres without the GVL.
  # Results are decoded by column type (bigint -> Integer, double precision -> Float).
  class PgConn
    include Transactions

    ERROR = PG::Error
    RESULT_TYPES = PG::TypeMapByOid.new.tap do |map|
      [20, 21, 23].each { |oid| map.add_coder(PG::TextDecoder::Integer.new(oid: oid)) } # int8/2/4
      [700, 701].each { |oid| map.add_coder(PG::TextDecoder::Float.new(oid: oid)) } # float4/8
      map.add_coder(PG::TextDecoder::Boolean.new(oid: 16))
    end

    def initialize(url, options)
      @pg = PG.connect(url, options)
      setup
    end

    # Runs a statement; returns its first row (or nil).
    def first_row(sql, *args)
      res = query(sql, args)
      res.ntuples.zero? ? nil : res.values.first
    ensure
      res&.clear
    end

    # Like first_row, for BEGIN, COMMIT, ... A COMMIT that Postgres answers ROLLBACK (the
    # transaction was aborted by an error nobody saw) is an error, never an acknowledgement.
    def run(sql, *args)
      res = query(sql, args)
      raise CommitRolledBack, "COMMIT rolled back an aborted transaction" if sql == "COMMIT" && res.cmd_status == "ROLLBACK"

      res.ntuples.zero? ? nil : res.values.first
    ensure
      res&.clear
    end

    # The new id comes from INSERT ... RETURNING id.
    def insert(sql, *args)
      first_row(@returning[sql] ||= "#{sql} RETURNING id", *args).first
    end

    def update(sql, *args)
      res = query(sql, args)
      res.cmd_tuples
    ensure
      res&.clear
    end

    # IDLE/ACTIVE: none; INTRANS: open; INERROR: open but aborted; UNKNOWN: the connection is lost.
    def in_transaction? = [PG::PQTRANS_INTRANS, PG::PQTRANS_INERROR].include?(@pg.transaction_status)
    def transaction_usable? = @pg.transaction_status == PG::PQTRANS_INTRANS
    def begin_transaction = run("BEGIN") # READ COMMITTED, Postgres' default

    def savepoint = run("SAVEPOINT job")
    def release_savepoint = run("RELEASE SAVEPOINT job")
    def rollback_to_savepoint = run("ROLLBACK TO SAVEPOINT job")

    # A connection Postgres or the network closed is reconnected (PQreset) as it is taken
    # from the pool, never in the middle of a transaction; its prepared statements are gone.
    # If Postgres still does not answer, PG::ConnectionBad: 503 database unavailable.
    def checkout
      return if @pg.status == PG::CONNECTION_OK

      @pg.reset
      setup
    end

    def close = @pg.finished? || @pg.finish

    private

    def setup
      @pg.type_map_for_results = RESULT_TYPES
      @pg.set_notice_receiver { |_| nil } # no WARNING lines on stderr (no access log either)
      @stmts = {}
      @returning ||= {}
    end

    def query(sql, args)
      return @pg.exec(sql) if args.empty?

      @pg.exec_prepared(@stmts[sql] ||= prepare(sql), args)
    end

    # The SQLite statement with $1, $2 ... for its ?s, prepared on this connection as Rails
    # names them (a1, a2, ...).
    def prepare(sql)
      name = "a#{@stmts.size + 1}"
      n = 0
      @pg.prepare(name, sql.gsub("?") { "$#{n += 1}" }).clear
      name
    end
  end

  # A COMMIT that Postgres answered with ROLLBACK: a 500, never a 503 (not PG::Error).
  class CommitRolledBack < StandardError; end

  class PostgresDatabase
    LOCKED = "database is locked"
    UNAVAILABLE = "database unavailable"
    # serialization failure, deadlock detected, lock not available
    LOCKED_STATES = %w[40001 40P01 55P03].freeze
    # admin shutdown, crash shutdown, cannot connect now (and all of class 08, connection exception)
    UNAVAILABLE_STATES = %w[57P01 57P02 57P03].freeze
    # Only where LAB_DATABASE_URL says nothing: a host that never answers fails in 10 s, not
    # never, and pg_stat_activity names the server.
    DEFAULTS = { connect_timeout: "10", application_name: "ruby-puma" }.freeze

    def initialize(config)
      @config = config
      given = PG::Connection.conninfo_parse(config.database_url).filter_map { |o| o[:keyword].to_sym if o[:val] }
      @options = DEFAULTS.reject { |key, _| given.include?(key) }
    rescue PG::Error => e
      raise ConfigError, "LAB_DATABASE_URL: #{one_line(e)}"
    end

    def name = "postgres"

    # U+0000 in a string field: Postgres' text cannot hold it (a 400, see App#storable).
    def refuses_nul? = true

    # A connection of the pool or the writer's, opened at start-up (App#start) before the
    # process serves a request; failing, one `lab:` line.
    def connect
      PgConn.new(@config.database_url, @options)
    rescue PG::Error => e
      each = @config.readers + (@config.write_path == "pool" ? 0 : 1)
      raise ConfigError, "LAB_DATABASE_URL: cannot connect: #{one_line(e)} (each process opens #{each} " \
                         "connections: LAB_READERS#{@config.write_path == "pool" ? "" : " + the writer"}; Postgres' max_connections?)"
    end

    def versions
      v = PG.library_version # e.g. 150018
      {
        "pg" => PG::VERSION,
        "libpq" => "#{v / 10_000}.#{v % 10_000}",
        "pool" => "Lab::Pool (app.rb: a Thread::Queue of LAB_READERS pg connections, Ruby #{RUBY_VERSION})",
      }
    end

    # In the master, before listening: Postgres answers and has the four tables with their
    # columns. Returns SHOW server_version.
    def check
      begin
        pg = PG.connect(@config.database_url, @options)
      rescue PG::Error => e
        raise ConfigError, "LAB_DATABASE_URL: cannot connect: #{one_line(e)}"
      end
      begin
        SCHEMA.each do |table, columns|
          have = pg.exec_params("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) " \
                                "AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [table]).column_values(0)
          missing = columns - have
          next if missing.empty?

          what = have.empty? ? "no table #{table}" : "table #{table} lacks #{missing.join(", ")}"
          raise ConfigError, "LAB_DATABASE_URL: the database has #{what} (make it from servers/schema.postgres.sql)"
        end
        pg.exec("SHOW server_version").getvalue(0, 0)
      rescue PG::Error => e
        raise ConfigError, "LAB_DATABASE_URL: cannot read the schema: #{one_line(e)}"
      ensure
        pg.finish
      end
    end

    # /health: no pragmas on Postgres.
    def pragmas(_pool) = nil

    # The 503 message for an error (by its SQLSTATE), or nil (500).
    def unavailable(error)
      return nil unless error.is_a?(PG::Error)

      state = error.result&.result_error_field(PG::PG_DIAG_SQLSTATE)
      return LOCKED if LOCKED_STATES.include?(state)
      return UNAVAILABLE if state&.start_with?("08") || UNAVAILABLE_STATES.include?(state)
      # No SQLSTATE: libpq's own error, a connection that is lost, closed or cannot be made.
      lost = error.is_a?(PG::ConnectionBad) || error.is_a?(PG::UnableToSend) ||
             (error.connection && error.connection.status != PG::CONNECTION_OK)
      UNAVAILABLE if state.nil? && lost
    end

    private

    def one_line(error) = error.message.split.join(" ")
  end
end
