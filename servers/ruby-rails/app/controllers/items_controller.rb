# frozen_string_literal: true

# Seed 002's items.
class ItemsController < ApplicationController
  def create
    payload = item_payload(body_object || {})
    now = timestamp
    item = write { Item.create!(payload: payload, created_at: now) }
    render_json({ id: item.id }, status: 201)
  end

  def show
    id = path_id
    item = Item.find_by(id: id)
    raise Lab::HttpError.new(404, "item #{id} not found") unless item

    render_json({ id: item.id, payload: item.payload, created_at: item.created_at })
  end
end
