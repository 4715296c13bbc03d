# frozen_string_literal: true

# SQLite Production Lab: the ruby-puma server. A plain Rack app (one object with
# `call(env)`, routes by hand) over the sqlite3 gem, run by Puma. The contract is
# ../openapi.yaml and ../README.md; puma.rb maps the LAB_* knobs onto Puma.
# With LAB_DATABASE=postgres the same endpoints and transactions run on the pg gem
# (loaded only then): the differences live behind SqliteDatabase / PostgresDatabase.

require "json"
require "cgi"
require "securerandom"
require "time"
require "tmpdir"
require "fileutils"
begin
  require "sqlite3"
  require "rack"
rescue LoadError => e
  warn "lab: #{e.message}: install the Debian packages ruby puma ruby-sqlite3 ruby-rack ruby-pg (or: bundle install)"
  exit 1
end

module Lab
  # A start-up error: printed as one `lab: ...` line, then exit 1 before listening.
  class ConfigError < StandardError; end

  # An HTTP error answered as {"error": message}.
  class HttpError < StandardError
    attr_reader :status, :headers

    def initialize(status, message, headers = nil)
      super(message)
      @status = status
      @headers = headers
    end
  end

  MAX_ID = 9_223_372_036_854_775_807
  MAX_DELAY_MS = 10_000
  MAX_BODY = 1_048_576
  MAX_PAYLOAD = 65_536
  # Puma threads per process on the writer|batch paths when LAB_THREADS is not given (pool: 3)
  WRITER_THREADS = 64
  # As servers/shared.toml declares them (tests/test_contract.py checks they agree).
  METRIC_NAMES = %w[cpu memory disk load requests].freeze

  PRAGMA_VALUES = {
    "journal_mode" => %w[delete truncate persist memory wal off],
    "synchronous" => %w[off normal full extra 0 1 2 3],
    "temp_store" => %w[default file memory 0 1 2],
    "foreign_keys" => %w[on off true false 0 1],
    "cache_size" => :integer,
    "mmap_size" => :integer,
    "journal_size_limit" => :integer,
    "wal_autocheckpoint" => :integer,
  }.freeze

  SCHEMA = {
    "requests" => %w[id uid ip method url parameters created_at updated_at],
    "metrics" => %w[id instance name value previous created_at],
    "items" => %w[id payload created_at],
    "users" => %w[uid username departname created updates],
  }.freeze

  # Is Ruby's YJIT compiling in this process (LAB_YJIT)?
  def self.yjit_enabled? = defined?(RubyVM::YJIT) && RubyVM::YJIT.respond_to?(:enabled?) && RubyVM::YJIT.enabled? ? true : false

  # SQLite's own knobs: with LAB_DATABASE=postgres they must be unset or empty (null in /health).
  SQLITE_ONLY = %w[LAB_PRAGMAS LAB_TXN_MODE LAB_BUSY LAB_CACHE LAB_SQL_LOG].freeze

  # The LAB_* environment, validated once in the Puma master before it listens.
  class Config
    attr_reader :host, :port, :database, :database_url, :db, :pragmas, :txn_mode, :busy, :busy_kind, :busy_arg,
                :write_path, :processes, :threads, :readers, :templates, :metrics_txn, :cache, :sql_log, :yjit

    def initialize(env)
      @host = env.fetch("LAB_HOST", "").empty? ? "127.0.0.1" : env["LAB_HOST"]
      @port = int(env, "LAB_PORT", nil, 1..65_535)
      @database = choice(env, "LAB_DATABASE", "sqlite", %w[sqlite postgres])
      if postgres?
        # LAB_DB is not read; SQLite's knobs stay nil (null in /health). The URL's syntax is
        # checked by PostgresDatabase (with the pg gem), still before Puma listens.
        SQLITE_ONLY.each do |name|
          raise ConfigError, "#{name} is SQLite's; unset it with LAB_DATABASE=postgres" unless env.fetch(name, "").empty?
        end
        @database_url = env.fetch("LAB_DATABASE_URL", "")
        if @database_url.empty?
          raise ConfigError, "LAB_DATABASE_URL is required with LAB_DATABASE=postgres " \
                             "(a libpq key=value string such as 'host=/tmp/pg port=5432 user=lab dbname=lab')"
        end
      else
        unless env.fetch("LAB_DATABASE_URL", "").empty?
          raise ConfigError, "LAB_DATABASE_URL is Postgres'; unset it with LAB_DATABASE=sqlite (or set LAB_DATABASE=postgres)"
        end

        @db = env["LAB_DB"].to_s
        raise ConfigError, "LAB_DB is required (path of a database made from servers/schema.sql)" if @db.empty?
        raise ConfigError, "LAB_DB='#{@db}' does not exist (make it from servers/schema.sql)" unless File.file?(@db)

        @pragmas = parse_pragmas(env.fetch("LAB_PRAGMAS", ""))
        @txn_mode = choice(env, "LAB_TXN_MODE", "deferred", %w[deferred immediate])
        @busy_kind, @busy_arg = parse_busy(env.fetch("LAB_BUSY", "").empty? ? "busy_timeout:5000" : env["LAB_BUSY"])
        @busy = @busy_kind == "none" ? "none" : "#{@busy_kind}:#{@busy_arg}"
      end
      @write_path = choice(env, "LAB_WRITE_PATH", "pool", %w[pool writer batch])
      @processes = int(env, "LAB_PROCESSES", 1, 1..)
      # writer|batch: a request thread only waits on the writer's queue (Thread::Queue#pop
      # releases the GVL), and Puma's threads are all the writes that can be queued: with 3, group
      # commit never batched more than 3 (python -m sqlitelab.experiments.write_paths, 2026-11-26)
      @threads = int(env, "LAB_THREADS", @write_path == "pool" ? 3 : WRITER_THREADS, 1..)
      @readers = int(env, "LAB_READERS", @threads, 1..)
      if @write_path != "pool" && @processes > 1
        raise ConfigError, "LAB_WRITE_PATH=#{@write_path} needs LAB_PROCESSES=1 (one writer thread serves one process)"
      end
      @metrics_txn = choice(env, "LAB_METRICS_TXN", "request", %w[request record])
      if @metrics_txn == "record" && @write_path != "pool"
        raise ConfigError, "LAB_METRICS_TXN=record needs LAB_WRITE_PATH=pool " \
                           "(got #{@write_path}: each record commits on the request's pooled connection)"
      end
      unless postgres?
        @cache = choice(env, "LAB_CACHE", "private", %w[private shared])
        @sql_log = choice(env, "LAB_SQL_LOG", "off", %w[off on])
      end

      # This stack's own knob (stack.toml): `run` starts Ruby with --enable-yjit for "on"; here
      # the value is checked, and that the running Ruby agrees with it.
      @yjit = choice(env, "LAB_YJIT", "off", %w[off on])
      if (@yjit == "on") != Lab.yjit_enabled?
        raise ConfigError, "LAB_YJIT=#{@yjit} but this Ruby #{Lab.yjit_enabled? ? 'has' : 'does not have'} " \
                           "YJIT enabled (the stack's run starts it with RUBYOPT=--enable-yjit)"
      end

      @templates = env.fetch("LAB_TEMPLATES", "").empty? ? File.expand_path("../templates", __dir__) : env["LAB_TEMPLATES"]
    end

    def clustered? = @processes > 1
    def postgres? = @database == "postgres"

    private

    def int(env, name, default, range)
      raw = env.fetch(name, "")
      if raw.empty?
        raise ConfigError, "#{name} is required (an integer in #{range.begin}..#{range.end})" if default.nil?

        return default
      end
      value = raw.match?(/\A[0-9]+\z/) ? raw.to_i : nil
      return value if value && range.cover?(value)

      raise ConfigError, "#{name}='#{raw}' is not an integer #{range.end ? "in #{range.begin}..#{range.end}" : ">= #{range.begin}"}"
    end

    def choice(env, name, default, allowed)
      raw = env.fetch(name, "")
      return default if raw.empty?
      return raw if allowed.include?(raw)

      raise ConfigError, "#{name}='#{raw}' is not one of #{allowed.join("|")}"
    end

    def parse_busy(raw)
      return ["none", nil] if raw == "none"

      kind, arg = raw.split(":", 2)
      if %w[busy_timeout sleep_poll retries].include?(kind) && arg&.match?(/\A[0-9]+\z/) && arg.to_i <= 2**31 - 1
        return [kind, arg.to_i]
      end

      raise ConfigError, "LAB_BUSY='#{raw}' is not one of busy_timeout:<ms>|sleep_poll:<ms>|retries:<n>|none"
    end

    def parse_pragmas(raw)
      raw.split(",").map(&:strip).reject(&:empty?).map do |item|
        name, value = item.split("=", 2).map { |s| s.strip.downcase }
        raise ConfigError, "LAB_PRAGMAS: '#{item}' is not name=value" if value.nil? || name.empty? || value.empty?

        allowed = PRAGMA_VALUES[name]
        if allowed.nil?
          raise ConfigError, "LAB_PRAGMAS: pragma '#{name}' is not allowed (allowed: #{PRAGMA_VALUES.keys.sort.join(", ")})"
        end

        ok = allowed == :integer ? value.match?(/\A-?[0-9]{1,19}\z/) : allowed.include?(value)
        unless ok
          expected = allowed == :integer ? "an integer" : "one of #{allowed.join("|")}"
          raise ConfigError, "LAB_PRAGMAS: #{name}='#{value}' is not #{expected}"
        end
        [name, value]
      end
    end
  end

  # LAB_SQL_LOG=on: Rails' development log in miniature (seed 001's `rails s`). One line per
  # statement, `  SQL (0.3ms)  <sql>  [bound values]`, appended to <LAB_DB>.sql.log right after
  # the statement finished, in the thread that ran it: one write(2) per line (sync = true),
  # under a mutex, as ActiveSupport's Logger writes log/development.log. Writing a file releases
  # the GVL, so another Puma thread runs in the middle of this thread's transaction.
  class SqlLog
    def initialize(path)
      @file = File.open(path, File::WRONLY | File::APPEND | File::CREAT, 0o644)
      @file.sync = true
      @lock = Thread::Mutex.new
    rescue SystemCallError => e
      raise ConfigError, "LAB_SQL_LOG=on: cannot open '#{path}' for append: #{e.message}"
    end

    # started: the CLOCK_MONOTONIC time the statement started.
    def statement(sql, args, started)
      ms = (Process.clock_gettime(Process::CLOCK_MONOTONIC) - started) * 1000
      line = +"  SQL (#{format("%.1f", ms)}ms)  #{sql}"
      line << "  [" << args.map { |v| v.nil? ? "nil" : v.inspect }.join(", ") << "]" unless args.empty?
      line << "\n"
      @lock.synchronize { @file.write(line) }
    rescue IOError, SystemCallError => e
      warn "log writing failed. #{e}" # as Logger::LogDevice: the request goes on
    end

    def close = @file.close
  end

  # The write transaction, the same on both databases (Conn, PgConn): the connection's
  # begin_transaction, the work, COMMIT; on any error ROLLBACK and re-raise.
  module Transactions
    # BEGIN <LAB_TXN_MODE> (Postgres: BEGIN); yield; COMMIT; on any error ROLLBACK and re-raise.
    def transaction
      begin_transaction
      value = yield self
      run("COMMIT")
      value
    rescue Exception # rubocop:disable Lint/RescueException
      rollback
      raise
    end

    def rollback
      run("ROLLBACK") if in_transaction?
    rescue self.class::ERROR
      nil
    end
  end

  # One SQLite connection with its prepared statements. Used by one thread at a time.
  # Every statement runs through first_row (alias run) or execute, which log it (LAB_SQL_LOG).
  class Conn
    include Transactions

    ERROR = SQLite3::Exception # what a failed statement raises

    # LAB_CACHE=shared: the gem (1.4.2) passes `flags:` straight to sqlite3_open_v2.
    SHARED_CACHE_FLAGS = SQLite3::Constants::Open::READWRITE | SQLite3::Constants::Open::SHAREDCACHE

    def initialize(config, log = nil)
      @log = log
      @db = if config.cache == "shared"
              SQLite3::Database.new(config.db, flags: SHARED_CACHE_FLAGS)
            else
              SQLite3::Database.new(config.db, readwrite: true)
            end
      case config.busy_kind
      when "busy_timeout"
        # SQLite's own sqlite3_busy_timeout: it sleeps inside sqlite3_step, and the
        # sqlite3 gem 1.4 holds Ruby's GVL there (seed 000).
        @db.busy_timeout(config.busy_arg)
      when "sleep_poll"
        # A busy handler that sleeps 1 ms per try (Ruby's sleep releases the GVL)
        # until <ms> have passed since the first try. The gem retries unless the
        # block returns false (nil means retry), so return a strict boolean.
        limit = config.busy_arg / 1000.0
        deadline = nil
        @db.busy_handler do |count|
          now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          deadline = now + limit if count.zero?
          if now < deadline
            sleep 0.001
            true
          else
            false
          end
        end
      when "retries"
        # Rails 7.1 `retries:`: retry without sleeping (seed 001).
        retries = config.busy_arg
        @db.busy_handler { |count| count <= retries }
      end
      config.pragmas.each { |name, value| execute("PRAGMA #{name} = #{value}") }
      @stmts = {}
      @begin = "BEGIN #{config.txn_mode.upcase}"
    end

    def stmt(sql)
      @stmts[sql] ||= @db.prepare(sql)
    end

    # Runs a statement to completion; returns its first row (or nil). With LAB_SQL_LOG=on it
    # then writes the statement's log line, whether it succeeded or failed (as Rails does).
    def first_row(sql, *args)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC) if @log
      s = stmt(sql)
      s.reset!
      args.each_with_index { |v, i| s.bind_param(i + 1, v) }
      s.step
    ensure
      s&.reset! # ends the statement, so an autocommit read releases its snapshot
      @log&.statement(sql, args, started)
    end
    alias run first_row

    # Every row of a statement without parameters (start-up only: pragmas, the schema check).
    def execute(sql)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC) if @log
      @db.execute(sql)
    ensure
      @log&.statement(sql, [], started)
    end

    def last_insert_row_id = @db.last_insert_row_id
    def changes = @db.changes
    def in_transaction? = @db.transaction_active?
    # Whether the open transaction can still commit its work (Postgres: not aborted).
    def transaction_usable? = in_transaction?
    def begin_transaction = run(@begin)

    # The database seam's statements (PgConn has the same methods).
    # An INSERT; returns the new row's id.
    def insert(sql, *args)
      run(sql, *args)
      last_insert_row_id
    end

    # An UPDATE; returns the number of rows it changed.
    def update(sql, *args)
      run(sql, *args)
      changes
    end

    def savepoint = run("SAVEPOINT job")
    def release_savepoint = run("RELEASE job")
    def rollback_to_savepoint = run("ROLLBACK TO job")

    # Called as a connection is taken from the pool (or by the writer before a transaction):
    # nothing to do for a SQLite file (PgConn reconnects a lost connection there).
    def checkout = nil

    def pragma(name) = first_row("PRAGMA #{name}")&.first

    def close
      @stmts.each_value { |s| s.close unless s.closed? }
      @stmts.clear
      @db.close unless @db.closed?
    end
  end

  # A fixed set of connections handed out to one thread at a time (Queue#pop sleeps
  # without the GVL when all are in use).
  class Pool
    def initialize(size, &open)
      @all = []
      size.times { @all << open.call }
      @idle = Thread::Queue.new
      @all.each { |c| @idle << c }
    rescue StandardError
      close
      raise
    end

    # Lends a connection (PgConn reconnects a lost one here) and takes it back.
    def with
      conn = @idle.pop
      conn.checkout
      yield conn
    ensure
      @idle << conn if conn
    end

    def close = @all.each(&:close)
  end

  # LAB_WRITE_PATH=writer|batch: one thread with its own connection, fed by a queue.
  # A request waits on its own one-slot queue for the result, sent after COMMIT.
  class Writer
    Job = Struct.new(:work, :reply) do
      def succeed(value) = reply << [true, value]
      def fail(error) = reply << [false, error]
    end

    def initialize(conn, batch:)
      @conn = conn
      @batch = batch
      @queue = Thread::Queue.new
      # /health's `writer`: transactions run, jobs in them, how many held each count of jobs
      @counts_lock = Mutex.new
      @transactions = 0
      @jobs = 0
      @sizes = Hash.new(0)
      @thread = Thread.new { run }
      @thread.name = "lab-writer"
    end

    # Runs work.call(conn) in the writer's transaction; returns its value after COMMIT.
    def submit(&work)
      job = Job.new(work, Thread::Queue.new)
      @queue << job
      ok, value = job.reply.pop
      raise value unless ok

      value
    end

    # The transactions the writer ran, the jobs in them, and the sizes' distribution.
    def counts
      @counts_lock.synchronize do
        { transactions: @transactions, jobs: @jobs, sizes: @sizes.sort.to_h { |k, v| [k.to_s, v] } }
      end
    end

    # Answers everything already queued, then stops the thread and closes its connection.
    def stop
      @queue.close
      @thread.join
      @conn.close
    end

    private

    def run
      while (job = @queue.pop)
        jobs = [job]
        # Let the request threads that are ready queue their jobs before the batch is taken
        # (they wait for the GVL this thread holds): else it commits one job at a time.
        Thread.pass if @batch
        jobs << @queue.pop while @batch && !@queue.empty?
        @counts_lock.synchronize do
          @transactions += 1
          @jobs += jobs.size
          @sizes[jobs.size] += 1
        end
        begin
          @conn.checkout
          @batch ? commit_batch(jobs) : commit_one(job)
        rescue Exception => e # rubocop:disable Lint/RescueException
          @conn.rollback # the writer thread never dies, nor leaves a transaction open
          jobs.each { |j| j.fail(e) } # a second answer to a job is never read
        end
      end
    end

    def commit_one(job)
      value = @conn.transaction { job.work.call(@conn) }
      job.succeed(value)
    rescue StandardError => e
      job.fail(e)
    end

    # Group commit: each job inside SAVEPOINT job ... RELEASE [SAVEPOINT] job, one COMMIT for all,
    # then every job in the batch is acknowledged. A failed job is rolled back to its
    # savepoint and answered alone; a failed COMMIT fails every job in the batch.
    def commit_batch(jobs)
      begin
        @conn.begin_transaction
      rescue StandardError => e
        return jobs.each { |j| j.fail(e) }
      end
      done = []
      jobs.each_with_index do |job, i|
        begin
          @conn.savepoint
          value = job.work.call(@conn)
          @conn.release_savepoint
          done << [job, value]
        rescue StandardError => e
          job.fail(e)
          begin
            @conn.rollback_to_savepoint
            @conn.release_savepoint
          rescue @conn.class::ERROR
            nil
          end
          next if @conn.transaction_usable?

          # The database ended the whole transaction (SQLite: e.g. an I/O error; Postgres: a lost
          # connection, or ROLLBACK TO failed and the transaction is aborted): nothing is acknowledged.
          done.each { |j, _| j.fail(e) }
          jobs[(i + 1)..].each { |j| j.fail(e) }
          return
        end
      end
      begin
        @conn.run("COMMIT")
      rescue StandardError => e
        @conn.rollback
        return done.each { |j, _| j.fail(e) }
      end
      done.each { |j, value| j.succeed(value) }
    end
  end

  # requests_handled over all processes. Single mode: a counter in memory. Clustered:
  # each worker also pwrite()s its count to <dir>/<pid> (dir made by the master
  # before fork, removed when it exits) and /health sums the files.
  class Counter
    attr_reader :dir

    def initialize(dir)
      @dir = dir
      @count = 0
      @lock = Thread::Mutex.new
      @file = nil
    end

    def after_fork
      @count = 0
      @file = File.open(File.join(@dir, Process.pid.to_s), File::RDWR | File::CREAT | File::TRUNC, 0o600) if @dir
    end

    def increment
      @lock.synchronize do
        @count += 1
        @file&.pwrite([@count].pack("Q"), 0)
      end
    end

    def total
      return @count unless @dir

      Dir.children(@dir).sum { |name| File.binread(File.join(@dir, name), 8)&.unpack1("Q") || 0 }
    end

    def close = @file&.close
  end

  # A template from $LAB_TEMPLATES, split once at start-up into literal text and
  # {{field}} slots; render() HTML-escapes each value (& < > " ').
  class Template
    def initialize(path)
      parts = File.read(path, encoding: "UTF-8").split(/\{\{(\w+)\}\}/)
      @pairs = parts.each_slice(2).map { |text, field| [text.freeze, field&.to_sym] }
      @size = parts.sum(&:bytesize)
    end

    def render(fields)
      out = String.new(capacity: @size + 512, encoding: Encoding::UTF_8)
      @pairs.each do |text, field|
        out << text
        out << CGI.escapeHTML(fields.fetch(field).to_s) if field
      end
      out
    end
  end

  # The database seam. App talks to a SqliteDatabase or a PostgresDatabase (postgres.rb,
  # loaded only with LAB_DATABASE=postgres): how the database is checked at start-up and a
  # connection opened (Conn, PgConn: the same methods, placeholders and id retrieval inside),
  # how an error maps to a 503, what /health reports. The endpoints and transactions are one
  # code path over both.
  class SqliteDatabase
    LOCKED = "database is locked"

    def initialize(config, log)
      @config = config
      @log = log
    end

    def name = "sqlite"

    # U+0000 in a string field: SQLite stores it as sent.
    def refuses_nul? = false

    def connect = Conn.new(@config, @log)

    def versions = { "sqlite3-ruby" => SQLite3::VERSION }

    # Refuses a database without the schema (in the master, before listening); also
    # applies the pragmas once, so a value SQLite rejects fails here. Returns SQLite's version.
    def check
      conn = Conn.new(@config, @log)
      SCHEMA.each do |table, columns|
        have = conn.execute("PRAGMA table_info(#{table})").map { |row| row[1] }
        missing = columns - have
        next if missing.empty?

        what = have.empty? ? "no table #{table}" : "table #{table} lacks #{missing.join(", ")}"
        raise ConfigError, "LAB_DB='#{@config.db}' has #{what} (make it from servers/schema.sql)"
      end
      conn.first_row("SELECT sqlite_version()").first
    rescue SQLite3::Exception => e
      raise ConfigError, "LAB_DB='#{@config.db}' cannot be used: #{e.message}"
    ensure
      conn&.close
    end

    # /health: each requested pragma read back from SQLite.
    def pragmas(pool)
      pool.with do |conn|
        @config.pragmas.to_h { |name, _| [name, conn.pragma(name).to_s.downcase] }
      end
    end

    # The 503 message for an error, or nil (500).
    def unavailable(error)
      LOCKED if error.is_a?(SQLite3::BusyException) || error.is_a?(SQLite3::LockedException)
    end
  end

  # What every request is checked against before it reaches the database, as servers/README.md
  # says it (ids, bodies, JSON that is Unicode text, the fields of each endpoint), and the
  # timestamps it stores. Included by App here and by ruby-rails' controllers, so the two Ruby
  # stacks refuse and store exactly alike; the including class answers refuses_nul? (Postgres).
  module Contract
    # A string the database can hold: Postgres' text cannot hold U+0000 (SQLite's can), so on
    # Postgres it is a 400 naming it, checked with the other validation before any write.
    def storable(field, value)
      return unless refuses_nul? && value.include?("\0")

      raise HttpError.new(400, "#{field} holds U+0000, which Postgres text cannot store")
    end

    def parse_id(raw)
      id = raw.match?(/\A[0-9]{1,19}\z/) ? raw.to_i : 0
      raise HttpError.new(400, "id must be an integer in 1..#{MAX_ID}") unless id.between?(1, MAX_ID)

      id
    end

    # At most 1 MiB: by Content-Length, or by reading at most that much.
    def read_body(env)
      length = env["CONTENT_LENGTH"]
      raise HttpError.new(413, "request body is over #{MAX_BODY} bytes") if length && length.to_i > MAX_BODY

      body = env["rack.input"]&.read(MAX_BODY + 1) || +""
      raise HttpError.new(413, "request body is over #{MAX_BODY} bytes") if body.bytesize > MAX_BODY

      body.force_encoding(Encoding::UTF_8)
    end

    def parse_object(body)
      raise HttpError.new(400, "body is not valid UTF-8") unless body.valid_encoding?
      if body.include?("\\u") && lone_surrogate?(body)
        raise HttpError.new(400, "body has a \\u escape of an unpaired UTF-16 surrogate")
      end

      value = JSON.parse(body)
      raise HttpError.new(400, "body must be a JSON object") unless value.is_a?(Hash)

      value
    rescue JSON::ParserError
      raise HttpError.new(400, "malformed JSON")
    end

    # A \u escape of a UTF-16 surrogate that is not a high one directly followed by a low one.
    # The json gem would store a lone one as invalid UTF-8 and read "\ud800\ud800" as U+10000.
    # Escapes are matched left to right, so "\\" is skipped whole.
    def lone_surrogate?(text)
      high_end = nil # where a high surrogate's escape ended, waiting for its low half
      text.scan(/\\(?:u(\h{4})|.)/m) do
        m = Regexp.last_match
        code = m[1]&.hex
        if high_end
          return true unless code&.between?(0xDC00, 0xDFFF) && m.begin(0) == high_end

          high_end = nil
        elsif code&.between?(0xD800, 0xDBFF)
          high_end = m.end(0)
        elsif code&.between?(0xDC00, 0xDFFF)
          return true
        end
      end
      !high_end.nil?
    end

    def parse_metrics(body)
      instance = body["instance"]
      unless instance.is_a?(String) && instance.length.between?(1, 64)
        raise HttpError.new(400, "instance must be a string of 1 to 64 characters")
      end
      storable("instance", instance)

      measurements = body["measurements"]
      unless measurements.is_a?(Array) && measurements.size == 5
        raise HttpError.new(400, "measurements must be an array of exactly 5 objects")
      end

      pairs = measurements.map do |m|
        name = m["name"] if m.is_a?(Hash)
        value = m["value"] if m.is_a?(Hash)
        unless name.is_a?(String) && name.length.between?(1, 64) && value.is_a?(Numeric) && value.to_f.finite?
          raise HttpError.new(400, "each measurement needs a name (string of 1 to 64 characters) and a finite number value")
        end
        storable("measurement name", name)

        [name, value.to_f]
      end
      [instance, pairs]
    end

    # The article's load_test=true: a random instance, the five names, values in [0, 100).
    def generated_metrics
      ["instance-#{rand(1..10)}", METRIC_NAMES.map { |name| [name, rand * 100] }]
    end

    def timestamp = Time.now.utc.strftime("%Y-%m-%dT%H:%M:%S.%6NZ")

    def utf8(str) = str.dup.force_encoding(Encoding::UTF_8).scrub

    # POST /items' payload: a string of at most 64 KiB of UTF-8.
    def item_payload(object)
      payload = object["payload"]
      raise HttpError.new(400, "payload must be a string") unless payload.is_a?(String)
      raise HttpError.new(400, "payload is over #{MAX_PAYLOAD} bytes") if payload.bytesize > MAX_PAYLOAD

      storable("payload", payload)
      payload
    end

    # POST /users/{uid}'s departname: a string of 1 to 64 characters.
    def departname(object)
      departname = object["departname"]
      unless departname.is_a?(String) && departname.length.between?(1, 64)
        raise HttpError.new(400, "departname must be a string of 1 to 64 characters")
      end
      storable("departname", departname)
      departname
    end
  end

  # A server as Puma runs it: App here, ruby-rails' RailsServer. The includer has `config`,
  # `counter`, `start` (per process, before it serves) and `stop`; configure maps LAB_* onto Puma
  # (each stack's puma.rb calls it), and the clustered master learns here of a worker that could
  # not open its connections.
  module PumaServer
    # requests_handled's counter: in memory (one process), or in a folder of one file per worker
    # (clustered), made in the lab's folder for this server when it gives one (LAB_RUNTIME_DIR:
    # removed by the lab even when Puma is SIGKILLed and never runs its at_exit).
    def self.counter(config, stack)
      runtime = ENV["LAB_RUNTIME_DIR"].to_s.empty? ? nil : ENV["LAB_RUNTIME_DIR"]
      Counter.new(config.clustered? ? Dir.mktmpdir("lab-#{stack}-", runtime) : nil)
    end

    # The SQLite library this process links (also with postgres, where no file is opened).
    def self.linked_sqlite_version
      memory = SQLite3::Database.new(":memory:")
      memory.get_first_value("SELECT sqlite_version()")
    ensure
      memory&.close
    end

    # PRAGMA compile_options of the SQLite library this process links (an in-memory database).
    def self.linked_sqlite_options
      memory = SQLite3::Database.new(":memory:")
      memory.execute("PRAGMA compile_options").map(&:first)
    ensure
      memory&.close
    end

    # Puma's configuration (dsl: the puma.rb being evaluated) for a server already validated.
    def self.configure(dsl, server)
      config = server.config
      dsl.environment "production"
      dsl.quiet # no access log
      dsl.raise_exception_on_sigterm false # SIGTERM: graceful stop, then exit 0
      host = config.host.include?(":") ? "[#{config.host}]" : config.host
      dsl.bind "tcp://#{host}:#{config.port}"
      dsl.threads config.threads, config.threads
      if config.clustered?
        # Clustered: the app is built once in the master; each worker opens its own
        # connections after fork and never shares them.
        dsl.workers config.processes
        dsl.preload_app!
        master = Process.pid
        dsl.on_worker_boot do
          server.start
        rescue ConfigError => e # Postgres refused this worker's connections
          server.fail_worker(e.message, master)
        end
        dsl.on_worker_shutdown { server.stop }
        at_exit do
          next unless Process.pid == master

          failed = server.worker_failed?
          server.remove_counter_dir
          exit 1 if failed
        end
      else
        # LAB_PROCESSES=1: Puma's single mode, so the PID the lab starts serves requests.
        dsl.workers 0
        begin
          server.start # every connection opens here, before Puma binds
        rescue ConfigError => e
          warn "lab: #{e.message}"
          exit 1
        end
        at_exit { server.stop }
      end
    end

    # LAB_PROCESSES > 1: a worker that cannot open its connections prints the one `lab:` line
    # (the first such worker only), stops the master (which then exits 1, see
    # worker_failed?) and exits.
    def fail_worker(message, master)
      File.open(failure_file, File::WRONLY | File::CREAT | File::EXCL, 0o600) { |f| f.write(message) }
      warn "lab: #{message}"
    rescue Errno::EEXIST
      nil
    ensure
      Process.kill("TERM", master)
      exit!(1)
    end

    def worker_failed? = counter.dir && File.exist?(failure_file)

    # The master's clean-up of the counter directory (clustered mode).
    def remove_counter_dir
      FileUtils.rm_rf([counter.dir, failure_file]) if counter.dir
    end

    private def failure_file = "#{counter.dir}.failed"
  end

  # The Rack application.
  class App
    include Contract
    include PumaServer

    JSON_TYPE = "application/json"
    HTML_TYPE = "text/html; charset=utf-8"
    TEXT_TYPE = "text/plain; charset=utf-8"

    INSERT_REQUEST = "INSERT INTO requests (uid, ip, method, url, parameters, created_at, updated_at) " \
                     "VALUES (?, ?, ?, ?, ?, ?, ?)"
    SELECT_REQUEST = "SELECT id, uid, ip, method, url, parameters, created_at, updated_at FROM requests WHERE id = ?"
    SELECT_LATEST = "SELECT value FROM metrics WHERE instance = ? AND name = ? ORDER BY id DESC LIMIT 1"
    INSERT_METRIC = "INSERT INTO metrics (instance, name, value, previous, created_at) VALUES (?, ?, ?, ?, ?)"
    INSERT_ITEM = "INSERT INTO items (payload, created_at) VALUES (?, ?)"
    SELECT_ITEM = "SELECT id, payload, created_at FROM items WHERE id = ?"
    SELECT_USER = "SELECT uid, username, departname, created FROM users WHERE uid = ?"
    UPDATE_USER = "UPDATE users SET departname = ?, updates = updates + 1 WHERE uid = ?"

    REQUEST_FIELDS = %i[id uid ip method url parameters created_at updated_at].freeze
    USER_FIELDS = %i[uid username departname created].freeze

    attr_reader :config, :counter

    # Validates the database and loads the templates; connections open in start.
    def initialize(config)
      @config = config
      @templates = %w[request user user_page].to_h do |name|
        path = File.join(config.templates, "#{name}.html")
        raise ConfigError, "LAB_TEMPLATES='#{config.templates}' has no #{name}.html" unless File.file?(path)

        [name.to_sym, Template.new(path)]
      end
      @sql_log = SqlLog.new("#{config.db}.sql.log") if config.sql_log == "on"
      @db = if config.postgres?
              require_relative "postgres"
              PostgresDatabase.new(config)
            else
              SqliteDatabase.new(config, @sql_log)
            end
      @database_version = @db.check
      # The SQLite library this process links (also with postgres, where no file is opened).
      @sqlite_version = config.postgres? ? PumaServer.linked_sqlite_version : @database_version
      @sqlite_options = PumaServer.linked_sqlite_options
      @counter = PumaServer.counter(config, "ruby-puma")
      @versions = {
        "ruby" => RUBY_VERSION,
        "puma" => defined?(Puma::Const::PUMA_VERSION) ? Puma::Const::PUMA_VERSION : "unknown",
        "rack" => Rack.release,
        "sqlite3-ruby" => SQLite3::VERSION,
      }.merge(@db.versions)
    end

    # Per process (after fork in clustered mode): open the connections (all of them, before
    # the process serves a request), start the writer.
    def start
      @counter.after_fork
      @readers = Pool.new(@config.readers) { @db.connect }
      @writer = Writer.new(@db.connect, batch: @config.write_path == "batch") if @config.write_path != "pool"
    end

    # Graceful stop: Puma has finished the requests in flight; the writer answers what
    # is queued, then every connection closes.
    def stop
      @writer&.stop
      @readers&.close
      @counter.close
      @sql_log&.close
      @writer = @readers = nil
    end

    def call(env)
      path = env["PATH_INFO"]
      response = begin
        route(env, env["REQUEST_METHOD"], path)
      rescue HttpError => e
        error(e.status, e.message, e.headers)
      rescue StandardError => e
        if (message = @db.unavailable(e)) # busy/locked, or Postgres gone: 503
          error(503, message)
        else
          warn "lab: #{e.class}: #{e.message.split.join(" ")}"
          error(500, "internal server error")
        end
      end
      response[2] = [] if env["REQUEST_METHOD"] == "HEAD" # as GET, headers only
      @counter.increment unless path == "/health"
      response
    end

    private

    # ---- routing ---------------------------------------------------------------

    # A path with an empty, "." or ".." segment ("//hello", "/./hello", "/items/../hello") names
    # no resource, whatever it would resolve to: 404, as in every stack (Go's ServeMux would
    # redirect it to the cleaned path). PATH_INFO is the raw path: "%2e%2e" is an ordinary segment.
    UNCLEAN_PATH = %r{//|/\.\.?(?:/|\z)}

    def route(env, method, path)
      get = method == "GET" || method == "HEAD"
      raise HttpError.new(404, "not found") if UNCLEAN_PATH.match?(path.to_s)

      case path
      when "/hello"
        get ? hello : not_allowed("GET, HEAD")
      when %r{\A/delay/([^/]+)\z}
        get ? delay(Regexp.last_match(1)) : not_allowed("GET, HEAD")
      when "/health"
        get ? health : not_allowed("GET, HEAD")
      when "/requests"
        method == "POST" ? create_request(env) : not_allowed("POST")
      when "/metrics"
        method == "POST" ? create_metrics(env) : not_allowed("POST")
      when "/items"
        method == "POST" ? create_item(env) : not_allowed("POST")
      when %r{\A/requests/([^/]*)\z}
        get ? show_request(Regexp.last_match(1)) : not_allowed("GET, HEAD")
      when %r{\A/items/([^/]*)\z}
        get ? show_item(Regexp.last_match(1)) : not_allowed("GET, HEAD")
      when %r{\A/users/([^/]*)\z}
        uid = Regexp.last_match(1)
        if get then show_user(uid)
        elsif method == "POST" then update_user(env, uid)
        else not_allowed("GET, HEAD, POST")
        end
      when %r{\A/users/([^/]*)/page\z}
        get ? show_user_page(Regexp.last_match(1)) : not_allowed("GET, HEAD")
      else
        raise HttpError.new(404, "not found")
      end
    end

    # ---- endpoints -------------------------------------------------------------

    def health
      json(200, {
        server: "ruby-puma",
        versions: @versions,
        sqlite_version: @sqlite_version,
        sqlite_compile_options: @sqlite_options,
        database: @db.name,
        database_version: @database_version,
        pid: Process.pid,
        knobs: {
          database: @db.name,
          pragmas: @db.pragmas(@readers),
          txn_mode: @config.txn_mode,
          busy: @config.busy,
          write_path: @config.write_path,
          processes: @config.processes,
          threads: @config.threads,
          readers: @config.readers,
          metrics_txn: @config.metrics_txn,
          cache: @config.cache,
          sql_log: @config.sql_log,
          yjit: @config.yjit,
        },
        emulated: {},
        requests_handled: @counter.total,
        writer: @writer&.counts,
      })
    end

    def hello
      respond(200, TEXT_TYPE, "Hello, World!")
    end

    # A calibration endpoint for load generators: Kernel#sleep releases the GVL, so the wait
    # holds a Puma thread but no CPU and no database connection; then the answer of /hello.
    def delay(raw)
      ms = raw.match?(/\A[0-9]+\z/) ? raw.to_i : -1
      raise HttpError.new(400, "ms must be an integer in 0..#{MAX_DELAY_MS}") unless ms.between?(0, MAX_DELAY_MS)

      sleep(ms / 1000.0)
      hello
    end

    def create_request(env)
      body = read_body(env)
      params = body.empty? ? {} : parse_object(body)
      host = env["HTTP_HOST"] || "#{env["SERVER_NAME"]}:#{env["SERVER_PORT"]}"
      url = +"http://#{host}/requests"
      url << "?" << env["QUERY_STRING"] unless env["QUERY_STRING"].to_s.empty?
      ip = env["REMOTE_ADDR"].to_s
      uid = SecureRandom.uuid
      now = timestamp
      parameters = begin
        JSON.generate(params)
      rescue JSON::GeneratorError # e.g. 1e400, which Ruby parses as Infinity
        raise HttpError.new(400, "body has a number out of range")
      end
      id = write { |conn| conn.insert(INSERT_REQUEST, uid, utf8(ip), "POST", utf8(url), parameters, now, now) }
      location = "/requests/#{id}"
      respond(302, HTML_TYPE, %(<html><body>You are being <a href="#{location}">redirected</a>.</body></html>),
              { "Location" => location })
    end

    def show_request(raw)
      id = parse_id(raw)
      row = @readers.with { |conn| conn.first_row(SELECT_REQUEST, id) }
      raise HttpError.new(404, "request #{id} not found") unless row

      respond(200, HTML_TYPE, @templates[:request].render(REQUEST_FIELDS.zip(row).to_h))
    end

    def create_metrics(env)
      body = read_body(env)
      instance, measurements = body.empty? ? generated_metrics : parse_metrics(parse_object(body))
      now = timestamp
      if @config.metrics_txn == "record"
        return json(201, { instance: instance, ids: metrics_records(instance, measurements, now) })
      end

      ids = write do |conn|
        measurements.map do |name, value|
          previous = conn.first_row(SELECT_LATEST, instance, name)&.first
          conn.insert(INSERT_METRIC, instance, name, value, previous, now)
        end
      end
      json(201, { instance: instance, ids: ids })
    end

    def create_item(env)
      payload = item_payload(parse_object(read_body(env)))
      now = timestamp
      id = write { |conn| conn.insert(INSERT_ITEM, payload, now) }
      json(201, { id: id })
    end

    def show_item(raw)
      id = parse_id(raw)
      row = @readers.with { |conn| conn.first_row(SELECT_ITEM, id) }
      raise HttpError.new(404, "item #{id} not found") unless row

      json(200, { id: row[0], payload: row[1], created_at: row[2] })
    end

    def show_user(raw)
      respond(200, HTML_TYPE, @templates[:user].render(find_user(parse_id(raw))))
    end

    def show_user_page(raw)
      respond(200, HTML_TYPE, @templates[:user_page].render(find_user(parse_id(raw))))
    end

    def update_user(env, raw)
      uid = parse_id(raw)
      departname = departname(parse_object(read_body(env)))

      row = write do |conn|
        raise HttpError.new(404, "user #{uid} not found") if conn.update(UPDATE_USER, departname, uid).zero?

        conn.first_row(SELECT_USER, uid)
      end
      respond(200, HTML_TYPE, @templates[:user].render(USER_FIELDS.zip(row).to_h))
    end

    # ---- helpers ---------------------------------------------------------------

    # LAB_METRICS_TXN=record, ActiveRecord's shape (pool only): for each measurement, the
    # lookup as an autocommit read on the request's pooled connection, then one transaction
    # for its INSERT. A failure at record k raises; records 1..k-1 stay committed, as in Rails.
    def metrics_records(instance, measurements, now)
      @readers.with do |conn|
        measurements.map do |name, value|
          previous = conn.first_row(SELECT_LATEST, instance, name)&.first
          conn.transaction { conn.insert(INSERT_METRIC, instance, name, value, previous, now) }
        end
      end
    end

    # U+0000 in a string field is a 400 on Postgres (Contract#storable).
    def refuses_nul? = @db.refuses_nul?

    # One write transaction: on a pooled connection in this thread (pool), or in the
    # writer thread, answered after its COMMIT (writer, batch).
    def write(&work)
      return @writer.submit(&work) if @writer

      @readers.with { |conn| conn.transaction(&work) }
    end

    def find_user(uid)
      row = @readers.with { |conn| conn.first_row(SELECT_USER, uid) }
      raise HttpError.new(404, "user #{uid} not found") unless row

      USER_FIELDS.zip(row).to_h
    end


    def not_allowed(allow)
      raise HttpError.new(405, "method not allowed", { "Allow" => allow })
    end

    def error(status, message, headers = nil)
      json(status, { error: message }, headers)
    end

    def json(status, object, headers = nil)
      respond(status, JSON_TYPE, JSON.generate(object), headers)
    end

    def respond(status, type, body, headers = nil)
      h = {
        "Content-Type" => type,
        "Content-Length" => body.bytesize.to_s,
        "Date" => Time.now.httpdate,
      }
      h.merge!(headers) if headers
      [status, h, [body]]
    end
  end

  # The one application object of this process (built in the master with preload_app!).
  def self.app
    @app ||= App.new(Config.new(ENV))
  end
end
