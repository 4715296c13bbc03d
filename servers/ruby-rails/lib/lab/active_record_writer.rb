# frozen_string_literal: true

module Lab
  # LAB_WRITE_PATH=writer|batch on ActiveRecord: ruby-puma's Writer (one thread fed by a queue,
  # each request answered after its COMMIT, /health's counts) whose thread holds one connection
  # of ActiveRecord's pool and runs each job's models inside ActiveRecord's transactions.
  # Group commit nests each job in `transaction(requires_new: true)`, a SAVEPOINT (Rails names it
  # active_record_1), inside one transaction: a failed job is rolled back to its savepoint and
  # answered alone; a failed COMMIT fails every job in the batch.
  class ActiveRecordWriter < Writer
    # Writer's connection: the writer thread's own in ActiveRecord's pool. ActiveRecord has
    # already rolled back a transaction that raised; a lost connection is reconnected as the
    # pool hands it out (verify!).
    class Connection
      def initialize(database) = @database = database
      def checkout = ActiveRecord::Base.connection.verify!
      def rollback = nil
      def close = nil # the pool closes it with the others as the process ends

      # Whether the open transaction can still commit (SQLite: still open; Postgres: not aborted).
      def transaction_usable?
        raw = ActiveRecord::Base.connection.raw_connection
        @database.name == "postgres" ? raw.transaction_status == PG::PQTRANS_INTRANS : raw.transaction_active?
      end
    end

    def initialize(database, batch:)
      super(Connection.new(database), batch: batch)
    end

    private

    def commit_one(job)
      job.succeed(ActiveRecord::Base.transaction { job.work.call })
    rescue StandardError => e
      job.fail(e)
    end

    # A batch whose transaction the database ended (a job's error aborted it) raises Abandoned:
    # ActiveRecord rolls it back and no job in it is acknowledged.
    class Abandoned < StandardError; end

    def commit_batch(jobs)
      done = []
      ActiveRecord::Base.transaction do
        jobs.each do |job|
          done << [job, ActiveRecord::Base.transaction(requires_new: true) { job.work.call }]
        rescue StandardError => e
          job.fail(e)
          raise Abandoned, e.message unless @conn.transaction_usable?
        end
      end
      done.each { |job, value| job.succeed(value) }
    rescue StandardError => e
      done.each { |job, _| job.fail(e) }
      jobs.each { |job| job.fail(e) } # a second answer to a job is never read
    end
  end
end
