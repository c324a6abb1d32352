@extends('layout')

@section('title', 'Home')

@section('content')
    <h1>Hello {{ auth()->user()->name ?? 'guest' }}</h1>
    <p>Visit number {{ $visits }}</p>
@endsection
