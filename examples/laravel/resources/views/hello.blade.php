@extends('layout')

@section('title', __('messages.title'))

@section('content')
    <h1>{{ __('messages.hello', ['name' => $name]) }}</h1>
@endsection
