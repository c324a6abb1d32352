@extends('layout')

@section('title', 'Not found')

@section('content')
    <h1>Not found</h1>
    <p>There is no page at /{{ request()->path() }}.</p>
@endsection
