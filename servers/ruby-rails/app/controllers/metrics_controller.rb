# frozen_string_literal: true

# Seed 001's endpoint: for each of five measurements, the instance's latest value, then the new row.
class MetricsController < ApplicationController
  def create
    object = body_object
    instance, measurements = object ? parse_metrics(object) : generated_metrics
    now = timestamp
    save = ->(name, value) { Metric.create!(instance: instance, name: name, value: value, previous: Metric.latest(instance, name), created_at: now).id }
    ids = if Lab.config.metrics_txn == "record"
            # ActiveRecord's own shape: the look-up outside, each save in its own transaction
            measurements.map { |name, value| save.call(name, value) }
          else
            write { measurements.map { |name, value| save.call(name, value) } }
          end
    render_json({ instance: instance, ids: ids }, status: 201)
  end
end
